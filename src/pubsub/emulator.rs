//! Google's Pub/Sub emulator as a child process: started on a free loopback
//! port, ready when its REST admin API answers, killed (with its JVM) on drop.
//!
//! Invariant: an `Emulator` value means a serving emulator; dropping it leaves no
//! process behind.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Google Cloud SDK installs the emulator; `$PUBSUB_EMULATOR_BIN` wins.
pub const DEFAULT_BIN: &str =
    "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator";

/// Why the emulator could not be started.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error(
        "Pub/Sub emulator not found at {0}: install the Google Cloud SDK component \
         'pubsub-emulator' (needs a JDK) or set PUBSUB_EMULATOR_BIN"
    )]
    /// The emulator is not installed where looked for.
    Missing(PathBuf),
    /// The emulator could not be started.
    #[error("cannot start the Pub/Sub emulator {0}: {1}")]
    Spawn(PathBuf, std::io::Error),
    /// The emulator did not answer in time.
    #[error("the Pub/Sub emulator did not answer on {host} within {secs} s (log: {log})")]
    NotReady {
        /// Where it was expected.
        host: String,
        /// How long was waited.
        secs: u64,
        /// Its log file.
        log: String,
    },
}

/// A running emulator.
pub struct Emulator {
    child: Child,
    host: String,
    _dir: tempfile::TempDir,
}

impl Emulator {
    /// Starts an emulator on a free loopback port and waits until it serves.
    pub fn start() -> Result<Self, EmulatorError> {
        let bin = PathBuf::from(
            std::env::var("PUBSUB_EMULATOR_BIN").unwrap_or_else(|_| DEFAULT_BIN.to_string()),
        );
        if !bin.exists() {
            return Err(EmulatorError::Missing(bin));
        }
        let dir = tempfile::tempdir().map_err(|e| EmulatorError::Spawn(bin.clone(), e))?;
        let port = free_port().map_err(|e| EmulatorError::Spawn(bin.clone(), e))?;
        let host = format!("127.0.0.1:{port}");
        let log = dir.path().join("emulator.log");
        let out = std::fs::File::create(&log).map_err(|e| EmulatorError::Spawn(bin.clone(), e))?;
        let err = out
            .try_clone()
            .map_err(|e| EmulatorError::Spawn(bin.clone(), e))?;
        let child = Command::new(&bin)
            .arg("--host=127.0.0.1")
            .arg(format!("--port={port}"))
            .env("JAVA_TOOL_OPTIONS", "-Xmx512m -XX:+UseSerialGC")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| EmulatorError::Spawn(bin.clone(), e))?;
        let mut emu = Emulator {
            child,
            host,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = emu.child.try_wait() {
                break;
            }
            if emu.ready() {
                return Ok(emu);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(EmulatorError::NotReady {
            host: emu.host.clone(),
            secs: 60,
            log: std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | "),
        })
    }

    /// `HOST:PORT`, as `PUBSUB_EMULATOR_HOST` expects it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The endpoint for the client libraries: `http://HOST:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.host)
    }

    fn ready(&self) -> bool {
        // the REST admin API answers on the gRPC port once the server is up
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(500)))
            .http_status_as_error(false)
            .build()
            .into();
        agent
            .get(&format!("http://{}/v1/projects/probe/topics", self.host))
            .call()
            .map(|r| r.status().is_success())
            .unwrap_or(false)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // the script starts a JVM as its child: kill the whole process group,
        // which `process_group(0)` made the child's own (pgid = its pid)
        if let Ok(pgid) = i32::try_from(self.child.id())
            && pgid > 1
        {
            // SAFETY: kill(2) with a negative pid signals exactly that process group
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}
