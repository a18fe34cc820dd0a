//! Keycloak — the identity provider Camunda 8 Self-Managed ships — as a
//! real OpenID Connect issuer per test: `org.keycloak:keycloak-quarkus-dist`
//! fetched from Maven once into postfach's cache, started in development
//! mode with an in-memory database and the realm of
//! `tests/fixtures/keycloak/shop-realm.json` (clients with service
//! accounts for the client-credentials flow, people with passwords and
//! groups, roles in the `roles` claim, audience `postfach`, and the
//! console's public client).
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A user task for the realm's purchasing group (`einkauf`).
pub const FREIGABE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn" targetNamespace="t">
  <process id="einkauf-freigabe" isExecutable="true">
    <startEvent id="s" />
    <sequenceFlow id="f1" sourceRef="s" targetRef="freigeben" />
    <userTask id="freigeben" camunda:candidateGroups="einkauf" />
    <sequenceFlow id="f2" sourceRef="freigeben" targetRef="e" />
    <endEvent id="e" />
  </process>
</definitions>
"#;

const VERSION: &str = "26.5.6";

pub struct Keycloak {
    child: Child,
    pub port: u16,
}

fn home() -> std::path::PathBuf {
    let kc = super::tools::cached(
        "keycloak",
        &format!("keycloak-{VERSION}/bin/kc.sh"),
        |dir| {
            let script = format!(
                "mvn -q -B dependency:copy -Dartifact=org.keycloak:keycloak-quarkus-dist:{VERSION}:tar.gz -DoutputDirectory=. && tar xzf keycloak-quarkus-dist-{VERSION}.tar.gz && rm keycloak-quarkus-dist-{VERSION}.tar.gz"
            );
            Command::new("sh")
                .args(["-c", &script])
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("fetching Keycloak with mvn: {e}"))
        },
    );
    kc.parent().unwrap().parent().unwrap().to_path_buf()
}

impl Keycloak {
    /// Starts Keycloak on a free port and waits until the realm answers.
    pub fn start() -> Keycloak {
        Keycloak::start_for_console(1)
    }

    /// As [`Keycloak::start`], the `postfach-console` client redirecting
    /// to a console on `http://127.0.0.1:CONSOLE_PORT/`.
    pub fn start_for_console(console_port: u16) -> Keycloak {
        let home = home();
        let import = home.join("data/import");
        std::fs::create_dir_all(&import).unwrap();
        // one Keycloak at a time reads the realm file: another test's
        // realm (another console port) must not be imported here
        let importing = std::fs::File::create(home.join("data/.import.lock")).unwrap();
        importing.lock().unwrap();
        let realm = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/keycloak/shop-realm.json"
        ))
        .unwrap();
        std::fs::write(
            import.join("shop-realm.json"),
            realm.replace("CONSOLE_PORT", &console_port.to_string()),
        )
        .unwrap();
        let port = super::server::free_ports(2);
        let log = std::fs::File::create(log_path(port)).unwrap();
        let child = Command::new(home.join("bin/kc.sh"))
            .args([
                "start-dev",
                "--db=dev-mem",
                "--import-realm",
                "--http-host=127.0.0.1",
                &format!("--http-port={port}"),
                &format!("--http-management-port={}", port + 1),
            ])
            .env("KC_BOOTSTRAP_ADMIN_USERNAME", "admin")
            .env("KC_BOOTSTRAP_ADMIN_PASSWORD", "admin")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting Keycloak: {e}"));
        let kc = Keycloak { child, port };
        let end = Instant::now() + Duration::from_secs(240);
        let discovery = format!("{}/.well-known/openid-configuration", kc.issuer());
        while ureq::get(&discovery).call().is_err() {
            assert!(
                Instant::now() < end,
                "Keycloak did not answer within 4 minutes: see {}",
                log_path(port).display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        drop(importing);
        kc
    }

    /// The realm's issuer URL (the `iss` of its tokens).
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}/realms/shop", self.port)
    }

    fn token(&self, form: &[(&str, &str)]) -> String {
        let url = format!("{}/protocol/openid-connect/token", self.issuer());
        let mut resp = ureq::post(&url)
            .send_form(form.iter().copied())
            .unwrap_or_else(|e| panic!("token from Keycloak: {e}"));
        let mut text = String::new();
        resp.body_mut()
            .as_reader()
            .read_to_string(&mut text)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["access_token"].as_str().unwrap().to_string()
    }

    /// A service's access token: the client-credentials flow Camunda's
    /// clients use.
    pub fn client_token(&self, client: &str, secret: &str) -> String {
        self.token(&[
            ("grant_type", "client_credentials"),
            ("client_id", client),
            ("client_secret", secret),
        ])
    }

    /// A person's access token (password grant of the `tasklist` client).
    pub fn person_token(&self, user: &str, password: &str) -> String {
        self.token(&[
            ("grant_type", "password"),
            ("client_id", "tasklist"),
            ("username", user),
            ("password", password),
        ])
    }
}

impl Drop for Keycloak {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

/// Where the Keycloak on `port` writes its log: beside the test build, not
/// in the machine's /tmp, which no run would clean.
fn log_path(port: u16) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("keycloak-{port}.log"))
}
