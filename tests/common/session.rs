//! Shell blocks of the README and the book, run as written: each block is a
//! session on a fresh database in a fresh directory (which sees the
//! repository's `bpmn/`, `docs/` and `postfach.toml`).
//!
//! A line is `postfach ARGS` (or `cargo run --release -- ARGS`: the same
//! binary, already built), `curl ARGS`, `export NAME=VALUE`, or the Pub/Sub
//! emulator's start line; any other program fails the block, so a shown
//! line is always one the test runs. The words `JOB` and `T` are the job and
//! lease token the last `acquire` answered, `TASK` the first task the last
//! `tasks` listed, `BACKUP` the directory of the backup the last `backup`
//! wrote. A comment `# outcome: WORD …` expects WORD on standard
//! output, `# exit N: …` that exit code; any other line must succeed (curl
//! with `--fail`). `< FILE` at a line's end is its standard input. Ports are the blocks' (7820, the emulator's 8085) in the
//! text and free ones when run. A server (`run`) or executor (`work`
//! without `--until-idle`) runs until Ctrl-C: it must be the block's last
//! line or end in `&`, and it must still be running when the block ends.
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The shell blocks (` ```sh `) of `text`, each as its lines with
/// continuations (`\` at the end) joined.
pub fn shell_blocks(text: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    let mut continued = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        match (&mut current, trimmed) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(lines), l) => match l.strip_suffix('\\') {
                Some(head) => continued.push_str(head),
                None => lines.push(std::mem::take(&mut continued) + l),
            },
            (None, _) => {}
        }
    }
    blocks
}

/// `line` split into words as a shell splits it (single and double quotes),
/// and its comment (after an unquoted ` #`).
pub fn words(line: &str) -> (Vec<String>, Option<String>) {
    let mut out = Vec::new();
    let (mut word, mut quote, mut any) = (String::new(), None::<char>, false);
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, '#') if !any => {
                return (out, Some(line[at + 1..].trim().to_string()));
            }
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    (out, None)
}

/// One block's session: its directory, database, environment, the values
/// its placeholders stand for and what runs in the background.
pub struct Session {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    ports: HashMap<String, u16>,
    placeholders: HashMap<&'static str, String>,
    /// The file the current line reads (`< FILE`).
    input: Option<String>,
    background: Vec<(String, Child)>,
    /// Where the block comes from, for messages.
    pub source: String,
}

impl Session {
    pub fn new(source: &str) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for name in ["bpmn", "docs", "postfach.toml"] {
            std::os::unix::fs::symlink(root.join(name), dir.path().join(name)).unwrap();
        }
        Session {
            dir,
            env: Vec::new(),
            ports: HashMap::new(),
            placeholders: HashMap::new(),
            input: None,
            background: Vec::new(),
            source: source.to_string(),
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("session.redb")
    }

    /// The free port that stands for `shown` (a port of the text).
    fn port(&mut self, shown: &str) -> u16 {
        *self
            .ports
            .entry(shown.to_string())
            .or_insert_with(|| super::server::free_ports(1))
    }

    /// `word` with the text's ports replaced by the session's.
    fn ported(&self, word: &str) -> String {
        let mut out = word.to_string();
        for (shown, port) in &self.ports {
            out = out.replace(&format!(":{shown}"), &format!(":{port}"));
        }
        out
    }

    /// Runs every line of `block` in order, then checks and stops what runs
    /// in the background.
    pub fn run_block(&mut self, block: &[String]) {
        let lines: Vec<&String> = block.iter().filter(|l| !words(l).0.is_empty()).collect();
        for (i, line) in lines.iter().enumerate() {
            self.run_line(line, i + 1 == lines.len());
        }
        self.finish();
    }

    fn run_line(&mut self, line: &str, last: bool) {
        let (mut args, comment) = words(line);
        let background = args.last().is_some_and(|a| a == "&");
        if background {
            args.pop();
        }
        self.input = None;
        if args.len() > 2 && args[args.len() - 2] == "<" {
            self.input = args.pop();
            args.pop();
        }
        let what = format!("{}: `{line}`", self.source);
        match args[0].as_str() {
            "export" => {
                let (name, value) = args[1].split_once('=').expect("export NAME=VALUE");
                let value = self.ported(value);
                self.env.push((name.to_string(), value));
            }
            "postfach" => self.postfach(&what, args[1..].to_vec(), comment, background, last),
            "cargo" if args[1..4] == ["run", "--release", "--"] => {
                self.postfach(&what, args[4..].to_vec(), comment, background, last)
            }
            "curl" => {
                let args: Vec<String> = args[1..].iter().map(|a| self.ported(a)).collect();
                let mut cmd = Command::new("curl");
                cmd.arg("--fail").args(&args);
                self.foreground(&what, cmd, comment);
            }
            emulator if emulator.ends_with("/cloud-pubsub-emulator") => {
                assert!(
                    background,
                    "{what}: the emulator runs in the background (&)"
                );
                let shown = args
                    .iter()
                    .find_map(|a| a.strip_prefix("--port="))
                    .expect("--port=")
                    .to_string();
                let port = self.port(&shown);
                let mut cmd = Command::new(emulator);
                cmd.args(args[1..].iter().map(|a| match a.strip_prefix("--port=") {
                    Some(_) => format!("--port={port}"),
                    None => self.ported(a),
                }));
                self.spawn(&what, cmd, port);
            }
            #[cfg(feature = "zeebe")]
            "zbctl" => {
                let args: Vec<String> = args[1..].iter().map(|a| self.ported(a)).collect();
                let mut cmd = Command::new(super::zeebe::zbctl_program());
                cmd.args(&args);
                self.foreground(&what, cmd, comment);
            }
            other => {
                panic!("{what}: no runner for `{other}`; the book shows only what its tests run")
            }
        }
    }

    fn postfach(
        &mut self,
        what: &str,
        mut args: Vec<String>,
        comment: Option<String>,
        background: bool,
        last: bool,
    ) {
        for a in args.iter_mut() {
            if let Some(value) = self.placeholders.get(a.as_str()) {
                *a = value.clone();
            }
        }
        // global flags come before the subcommand, with their values
        let mut at = 0;
        while at < args.len() && args[at].starts_with("--") {
            at += if args[at].contains('=') || args[at] == "--json" {
                1
            } else {
                2
            };
        }
        let sub_name = args.get(at).cloned().unwrap_or_default();
        let until_interrupted =
            sub_name == "run" || (sub_name == "work" && !args.contains(&"--until-idle".into()));
        assert!(
            !until_interrupted || background || last,
            "{what}: it runs until Ctrl-C, so it ends the block or ends in `&`"
        );
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_postfach"));
        if !args.iter().any(|a| a == "--db") {
            cmd.arg("--db").arg(self.db());
        }
        if ["acquire", "tasks", "backup"].contains(&sub_name.as_str()) {
            cmd.arg("--json");
        }
        if sub_name == "run" {
            if let Some(at) = args.iter().position(|a| a == "--zeebe-listen") {
                let shown = args[at + 1].rsplit(':').next().unwrap().to_string();
                args[at + 1] = format!("127.0.0.1:{}", self.port(&shown));
            }
            let port = match args.iter().position(|a| a == "--listen") {
                Some(at) => {
                    let shown = args[at + 1].rsplit(':').next().unwrap().to_string();
                    let port = self.port(&shown);
                    args[at + 1] = format!("127.0.0.1:{port}");
                    port
                }
                None => {
                    let port = self.port("7820");
                    args.extend(["--listen".into(), format!("127.0.0.1:{port}")]);
                    port
                }
            };
            cmd.args(&args);
            self.spawn(what, cmd, port);
            self.wait_ready(what, port);
        } else if until_interrupted {
            cmd.args(&args);
            self.spawn(what, cmd, 0);
        } else {
            cmd.args(&args);
            let stdout = self.foreground(what, cmd, comment);
            self.remember(&sub_name, &stdout);
        }
    }

    /// Runs `cmd` to its end and checks its exit code and outcome.
    fn foreground(&self, what: &str, mut cmd: Command, comment: Option<String>) -> String {
        let mut child = cmd
            .current_dir(self.dir())
            .envs(self.env.iter().cloned())
            .stdin(self.stdin(what))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        // read while it runs, so a long output cannot fill the pipe
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        // a line that does not end (it waits for something the block never
        // gives) fails the block instead of holding the test
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{what}: still running after 120 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = child.wait().unwrap();
        let stdout = String::from_utf8_lossy(&stdout.join().unwrap()).to_string();
        let said = format!(
            "{stdout}{}",
            String::from_utf8_lossy(&stderr.join().unwrap())
        );
        let comment = comment.unwrap_or_default();
        let expected_exit = comment
            .strip_prefix("exit ")
            .map(|r| r.split(':').next().unwrap().trim().parse::<i32>().unwrap());
        assert_eq!(
            status.code(),
            Some(expected_exit.unwrap_or(0)),
            "{what}: {said}"
        );
        if let Some(outcome) = comment.strip_prefix("outcome: ") {
            let word = outcome.split(" (").next().unwrap().trim();
            assert!(
                stdout.contains(word),
                "{what}: expected '{word}' in {stdout}"
            );
        }
        stdout
    }

    /// Standard input: the file a line names with `< FILE` at its end.
    fn stdin(&self, what: &str) -> Stdio {
        match &self.input {
            Some(file) => Stdio::from(
                std::fs::File::open(self.dir().join(file))
                    .unwrap_or_else(|e| panic!("{what}: {file}: {e}")),
            ),
            None => Stdio::null(),
        }
    }

    fn remember(&mut self, sub: &str, stdout: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(stdout) else {
            return;
        };
        match sub {
            "acquire" => {
                let job = &v["jobs"][0];
                if let Some(id) = job["job"].as_str() {
                    self.placeholders.insert("JOB", id.to_string());
                    self.placeholders
                        .insert("T", job["lease_token"].to_string());
                }
            }
            "tasks" => {
                if let Some(id) = v["tasks"][0]["task"].as_str() {
                    self.placeholders.insert("TASK", id.to_string());
                }
            }
            "backup" => {
                if let Some(path) = v["backups"][0]["path"].as_str() {
                    self.placeholders.insert("BACKUP", path.to_string());
                }
            }
            _ => {}
        }
    }

    fn spawn(&mut self, what: &str, mut cmd: Command, port: u16) {
        let child = cmd
            .current_dir(self.dir())
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        self.background.push((what.to_string(), child));
        if port != 0 {
            let up = (0..600).any(|_| {
                std::thread::sleep(Duration::from_millis(100));
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            assert!(up, "{what}: nothing listens on port {port}");
        } else {
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits until the server on `port` answers `/health/ready` with 200.
    fn wait_ready(&self, what: &str, port: u16) {
        use std::io::Write;
        let ready = (0..300).any(|_| {
            let answer = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                s.write_all(b"GET /health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
                let mut head = [0u8; 12];
                s.read_exact(&mut head)?;
                Ok(head)
            });
            let ok = answer.is_ok_and(|head| head.ends_with(b" 200"));
            if !ok {
                std::thread::sleep(Duration::from_millis(100));
            }
            ok
        });
        assert!(ready, "{what}: the server never became ready");
    }

    /// Checks that what runs in the background is still running, and stops it.
    fn finish(&mut self) {
        for (what, mut child) in self.background.drain(..) {
            let status = child.try_wait().unwrap();
            let _ = child.kill();
            let _ = child.wait();
            assert!(status.is_none(), "{what}: ended early with {status:?}");
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for (_, child) in self.background.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
