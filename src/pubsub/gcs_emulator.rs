//! A Cloud Storage emulator (`fake-gcs-server`, a Go program) as a child
//! process, for tests and `postfach demo --pubsub --claim-check`: found on the
//! PATH, in Go's bin directory or `$FAKE_GCS_SERVER_BIN`, else installed once
//! with `go install` from the Go module proxy; started in memory on a free
//! loopback port, ready when its JSON API answers, killed on drop.
//!
//! Invariant: a `FakeGcs` value means a serving emulator; dropping it leaves no
//! process behind.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The module `go install` builds.
pub const MODULE: &str = "github.com/fsouza/fake-gcs-server@v1.56.1";

/// Why the emulator could not be started.
#[derive(Debug, thiserror::Error)]
pub enum GcsEmulatorError {
    /// Not installed, and `go install` failed.
    #[error(
        "fake-gcs-server is not installed and `go install {MODULE}` failed: {0} \
         (install Go, or set FAKE_GCS_SERVER_BIN to the program)"
    )]
    Install(String),
    /// It could not be started.
    #[error("cannot start fake-gcs-server {0}: {1}")]
    Spawn(PathBuf, std::io::Error),
    /// It did not answer in time.
    #[error("fake-gcs-server did not answer on {0} within 30 s")]
    NotReady(String),
}

/// A running Cloud Storage emulator.
pub struct FakeGcs {
    child: Child,
    host: String,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// Where `postfach` installs the program when nothing else has it.
fn install_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("postfach")
        .join("bin")
}

/// The program: `$FAKE_GCS_SERVER_BIN`, the PATH, `~/go/bin`, postfach's
/// cache, else `go install` into postfach's cache (once, under a file lock, so
/// parallel tests install it once).
pub fn program() -> Result<PathBuf, GcsEmulatorError> {
    if let Some(p) = std::env::var_os("FAKE_GCS_SERVER_BIN") {
        return Ok(PathBuf::from(p));
    }
    let name = "fake-gcs-server";
    if let Some(p) = on_path(name) {
        return Ok(p);
    }
    if let Some(p) = home().map(|h| h.join("go").join("bin").join(name))
        && p.is_file()
    {
        return Ok(p);
    }
    let dir = install_dir();
    let bin = dir.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| GcsEmulatorError::Install(e.to_string()))?;
    let lock = std::fs::File::create(dir.join(".fake-gcs-server.lock"))
        .map_err(|e| GcsEmulatorError::Install(e.to_string()))?;
    lock.lock()
        .map_err(|e| GcsEmulatorError::Install(e.to_string()))?;
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!(
        "postfach: installing {MODULE} into {} (once)",
        dir.display()
    );
    let out = Command::new("go")
        .args(["install", MODULE])
        .env("GOBIN", &dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GcsEmulatorError::Install(format!("go: {e}")))?;
    if !out.status.success() || !bin.is_file() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(GcsEmulatorError::Install(tail.join(" | ")));
    }
    Ok(bin)
}

impl FakeGcs {
    /// Starts an in-memory emulator on a free loopback port and waits until it serves.
    pub fn start() -> Result<Self, GcsEmulatorError> {
        let bin = program()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| GcsEmulatorError::Spawn(bin.clone(), e))?
            .port();
        let host = format!("127.0.0.1:{port}");
        let child = Command::new(&bin)
            .args([
                "-scheme",
                "http",
                "-host",
                "127.0.0.1",
                "-backend",
                "memory",
            ])
            .args(["-port", &port.to_string(), "-public-host", &host])
            .args(["-external-url", &format!("http://{host}")])
            .args(["-log-level", "error"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| GcsEmulatorError::Spawn(bin.clone(), e))?;
        let mut emu = FakeGcs { child, host };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = emu.child.try_wait() {
                break;
            }
            if emu.get("/storage/v1/b").is_some() {
                return Ok(emu);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(GcsEmulatorError::NotReady(emu.host.clone()))
    }

    /// `HOST:PORT`, as `STORAGE_EMULATOR_HOST` expects it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `http://HOST:PORT`, for `[storage] endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.host)
    }

    fn get(&self, path: &str) -> Option<serde_json::Value> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .get(&format!("http://{}{path}", self.host))
            .call()
            .ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.body_mut().read_json().ok()
    }

    /// Names of the objects in `bucket` (empty when it has none or does not exist).
    pub fn objects(&self, bucket: &str) -> Vec<String> {
        self.get(&format!("/storage/v1/b/{bucket}/o"))
            .and_then(|v| {
                v.get("items").and_then(|i| i.as_array()).map(|items| {
                    items
                        .iter()
                        .filter_map(|o| o.get("name").and_then(|n| n.as_str()).map(String::from))
                        .collect()
                })
            })
            .unwrap_or_default()
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
