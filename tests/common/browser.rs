//! A real browser for the console tests: Debian's chromium, headless, and its
//! WebDriver (chromium-driver). Whichever of the two is missing is installed
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

/// Debian's WebDriver for chromium.
const DRIVER: &str = "/usr/bin/chromedriver";

/// The Debian packages of the browser and its driver that are not installed.
fn missing() -> Vec<&'static str> {
    let mut m = Vec::new();
    if find().is_none() {
        m.push("chromium");
    }
    if !std::path::Path::new(DRIVER).is_file() {
        m.push("chromium-driver");
    }
    m
}

/// The browser, with its driver, each installed from Debian's packages when
/// missing.
pub fn chromium() -> PathBuf {
    if missing().is_empty() {
        return find().expect("found above");
    }
    let lock = std::fs::File::create(std::env::temp_dir().join("postfach-chromium.lock")).unwrap();
    lock.lock().unwrap();
    let packages = missing();
    if packages.is_empty() {
        return find().expect("found above");
    }
    eprintln!("installing {} (apt-get install)", packages.join(" "));
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
    let mut args = vec!["install", "-y", "-qq"];
    args.extend(&packages);
    let out = apt(&args);
    assert!(
        out.status.success(),
        "apt-get install {} failed: {}",
        packages.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(missing().is_empty(), "still missing: {:?}", missing());
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
        // chromium leaves its scratch directories in TMPDIR: keep them in
        // the profile, which is removed when this returns.
        .env("TMPDIR", profile.path())
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

/// A headless chromium driven over WebDriver (Debian's chromedriver), for
/// tests that click and type. Ends the browser on drop.
pub struct Driver {
    child: std::process::Child,
    base: String,
    session: String,
    /// The browser's profile and TMPDIR (chromium leaves scratch directories
    /// there); removed after the browser ended.
    scratch: tempfile::TempDir,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Driver {
    pub fn start() -> Driver {
        let binary = chromium();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let scratch = tempfile::tempdir().unwrap();
        let child = Command::new(DRIVER)
            .arg(format!("--port={port}"))
            .env("TMPDIR", scratch.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let mut d = Driver {
            child,
            base,
            session: String::new(),
            scratch,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while d.call("GET", "/status", None).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "chromedriver never answered"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let caps = serde_json::json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {
                "binary": binary.display().to_string(),
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1000",
                         format!("--user-data-dir={}", d.scratch.path().join("profile").display())]
            },
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        let v = d.call("POST", "/session", Some(caps)).expect("a session");
        d.session = v["value"]["sessionId"]
            .as_str()
            .expect("session id")
            .to_string();
        d
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Option<serde_json::Value> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!("{}{path}", self.base);
        let mut r = match (method, body) {
            ("GET", _) => agent.get(&url).call().ok()?,
            ("DELETE", _) => agent.delete(&url).call().ok()?,
            (_, b) => agent
                .post(&url)
                .send_json(b.unwrap_or(serde_json::json!({})))
                .ok()?,
        };
        r.body_mut().read_json().ok()
    }

    fn session(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let v = self
            .call(method, &format!("/session/{}{path}", self.session), body)
            .unwrap_or_else(|| panic!("{method} {path}: no answer"));
        assert!(v["value"]["error"].is_null(), "{method} {path}: {v}");
        v["value"].clone()
    }

    pub fn open(&self, url: &str) {
        self.session("POST", "/url", Some(serde_json::json!({"url": url})));
    }

    /// The first element matching `css`, waiting up to 30 s for it (a
    /// loaded CI machine runs many browsers at once).
    pub fn find(&self, css: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let v = self
                .call(
                    "POST",
                    &format!("/session/{}/element", self.session),
                    Some(serde_json::json!({"using": "css selector", "value": css})),
                )
                .unwrap();
            if let Some(id) = v["value"][ELEMENT].as_str() {
                return id.to_string();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no element {css}: {v}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// An action on the element matching `css`, found again when the page
    /// replaced it between finding and acting (its views re-render as they poll).
    fn on_element(
        &self,
        css: &str,
        method: &str,
        action: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        for _ in 0..20 {
            let e = self.find(css);
            let v = self
                .call(
                    method,
                    &format!("/session/{}/element/{e}/{action}", self.session),
                    body.clone(),
                )
                .unwrap_or_else(|| panic!("{action} {css}: no answer"));
            // replaced by a redraw between finding and acting: a detached
            // element is reported stale, or not interactable mid-redraw
            let error = &v["value"]["error"];
            if error == "stale element reference" || error == "element not interactable" {
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            assert!(v["value"]["error"].is_null(), "{action} {css}: {v}");
            return v["value"].clone();
        }
        panic!("{css} went stale or was not interactable 20 times in a row")
    }

    pub fn click(&self, css: &str) {
        self.on_element(css, "POST", "click", Some(serde_json::json!({})));
    }

    pub fn type_into(&self, css: &str, text: &str) {
        self.on_element(
            css,
            "POST",
            "value",
            Some(serde_json::json!({"text": text})),
        );
    }
}

impl Driver {
    /// The visible text of the first element matching `css`.
    pub fn text(&self, css: &str) -> String {
        self.on_element(css, "GET", "text", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits up to 30 s until the text of `css` contains `part`; returns it.
    pub fn wait_for_text(&self, css: &str, part: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let t = self.text(css);
            if t.contains(part) {
                return t;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{css} never showed {part:?}; it shows {t:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Runs `script` in the page and returns its value.
    pub fn execute(&self, script: &str) -> serde_json::Value {
        self.session(
            "POST",
            "/execute/sync",
            Some(serde_json::json!({"script": script, "args": []})),
        )
    }

    /// Picks `value` in the first `<select>` matching `css`.
    pub fn select(&self, css: &str, value: &str) {
        self.find(css);
        let script = format!(
            "const s = document.querySelector({css:?}); s.value = {value:?}; \
             s.dispatchEvent(new Event('change')); return s.value;"
        );
        assert_eq!(self.execute(&script), serde_json::json!(value), "{css}");
    }

    /// Saves a screenshot of the page as a test artefact, under
    /// target/tmp/console-screenshots/NAME.png; returns the path.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        use base64::Engine;
        let png = self.session("GET", "/screenshot", None);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64 PNG"))
            .expect("a PNG");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The browser's log entries at level SEVERE (errors, failed requests,
    /// refused by the Content-Security-Policy) since the last call.
    pub fn errors(&self) -> Vec<String> {
        let v = self.session(
            "POST",
            "/se/log",
            Some(serde_json::json!({"type": "browser"})),
        );
        v.as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|e| e["level"] == "SEVERE")
                    .map(|e| e["message"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
