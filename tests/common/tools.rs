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
