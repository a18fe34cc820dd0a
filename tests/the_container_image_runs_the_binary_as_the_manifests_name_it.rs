//! The `Dockerfile` builds the image the Kubernetes manifests name
//! (`postfach:0.1.0`): hadolint finds nothing to say about it, its runtime
//! stage runs the `postfach` binary as a non-root user with the default
//! configuration and the reference model inside, and the build context
//! leaves `target/` out. (Building the image needs a container engine, which
//! the test machines do not run; the book's steps build and push it.)
use crate::common;

fn file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_container_image_runs_the_binary_as_the_manifests_name_it() {
    let hadolint = common::tools::hadolint();
    let out = std::process::Command::new(&hadolint)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", hadolint.display()));
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "hadolint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let dockerfile = file("Dockerfile");
    let runtime = dockerfile
        .rsplit("\nFROM ")
        .next()
        .expect("a runtime stage");
    assert!(
        runtime.contains("COPY --from=build /src/target/release/postfach /usr/local/bin/postfach")
    );
    assert!(runtime.contains(r#"ENTRYPOINT ["/usr/local/bin/postfach"]"#));
    let user = runtime
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the runtime names its user");
    assert!(
        !user.starts_with("0") && !user.starts_with("root"),
        "runs as {user}"
    );
    // what the runtime copies from the context is there
    for line in runtime
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let source = line.split_whitespace().nth(1).unwrap();
        assert!(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(source)
                .is_file(),
            "{line}"
        );
    }
    assert!(dockerfile.contains("cargo build --release --locked --bin postfach"));

    // the tag it documents is the one the manifests deploy
    let kustomization = file("deploy/kubernetes/kustomization.yaml");
    let value = |key: &str| {
        kustomization
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("kustomization has no {key}"))
            .trim()
            .to_string()
    };
    let image = format!("{}:{}", value("newName:"), value("newTag:"));
    assert!(
        dockerfile.contains(&format!("docker build -t {image} .")),
        "the Dockerfile builds {image}"
    );
    let ignore = file(".dockerignore");
    assert!(ignore.lines().any(|l| l.trim() == "target/"), "{ignore}");
}
