//! A real browser for the console tests: Debian's chromium, headless. Installed
//! with apt-get on first use (as CI's fresh machine needs), once, under a lock.
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn find() -> Option<PathBuf> {
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// The browser, installed from Debian's packages when missing.
pub fn chromium() -> PathBuf {
    if let Some(p) = find() {
        return p;
    }
    let lock = std::fs::File::create(std::env::temp_dir().join("postfach-chromium.lock")).unwrap();
    lock.lock().unwrap();
    if let Some(p) = find() {
        return p;
    }
    eprintln!("installing chromium (apt-get install chromium)");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("apt-get: {e}: install Debian's chromium to run the console tests")
            })
    };
    apt(&["update", "-qq"]);
    let out = apt(&["install", "-y", "-qq", "chromium"]);
    assert!(
        out.status.success(),
        "apt-get install chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    find().expect("chromium is installed")
}

/// The DOM of `url` after its scripts ran (`virtual_ms` of virtual time).
pub fn dom(url: &str, virtual_ms: u64) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.path().display()),
            &format!("--virtual-time-budget={virtual_ms}"),
            "--dump-dom",
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
