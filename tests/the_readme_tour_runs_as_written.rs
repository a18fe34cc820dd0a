//! The README's five-minute tour runs as written: each command of its shell
//! blocks, in order, on a fresh database, says what its `# outcome:`
//! comment says; `JOB` and `T` are the job and lease token `acquire`
//! answered, and `postfach run` serves on a free port until it is ready.
#![cfg(feature = "server")]
use std::process::Command;

/// The commands of the README's section `heading`, with the word their
/// `# outcome:` comment expects (if any).
fn tour(heading: &str) -> Vec<(String, Option<String>)> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("the README has a section '{heading}'"));
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in section.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            l if in_sh && l.starts_with("postfach ") => {
                let (cmd, comment) = match l.split_once("  #") {
                    Some((c, k)) => (c.trim(), Some(k.trim())),
                    None => (l, None),
                };
                let expect = comment
                    .and_then(|c| c.strip_prefix("outcome: "))
                    .map(|e| e.split(" (").next().unwrap().trim().to_string());
                out.push((cmd.to_string(), expect));
            }
            _ => {}
        }
    }
    out
}

/// `line` split as a shell splits it (double quotes only).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut word, mut quoted, mut any) = (String::new(), false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

#[test]
fn the_readme_tour_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tour.redb");
    let commands = tour("Five minutes with postfach");
    assert!(commands.len() >= 10, "{commands:?}");
    let (mut job, mut lease) = (String::new(), String::new());
    for (line, expect) in commands {
        let mut args = words(&line);
        args.remove(0); // postfach
        for a in args.iter_mut() {
            if a == "JOB" {
                *a = job.clone();
            } else if a == "T" {
                *a = lease.clone();
            }
        }
        if args[0] == "run" {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let listen = args.iter().position(|a| a == "--listen").unwrap() + 1;
            args[listen] = format!("127.0.0.1:{port}");
            let mut child = Command::new(env!("CARGO_BIN_EXE_postfach"))
                .arg("--db")
                .arg(&db)
                .args(&args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let up = (0..200).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            child.kill().unwrap();
            child.wait().unwrap();
            assert!(up, "{line}: the server did not listen");
            continue;
        }
        let json = args[0] == "acquire";
        let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
            .arg("--db")
            .arg(&db)
            .args(if json { &["--json"][..] } else { &[][..] })
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "{line}: {stdout}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        if json {
            let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            job = v["jobs"][0]["job"].as_str().unwrap().to_string();
            lease = v["jobs"][0]["lease_token"].to_string();
        }
        if let Some(word) = expect {
            assert!(
                stdout.contains(&word),
                "{line}: expected '{word}' in {stdout}"
            );
        }
    }
}
