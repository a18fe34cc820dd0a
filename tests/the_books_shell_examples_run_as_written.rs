//! Every shell block of the book runs as written (`common::session`): each
//! chapter is one session on a fresh database, its blocks in order, each
//! line checked for the exit code and outcome its comment names. A chapter
//! that shows a command the tests cannot run fails here, so the book shows
//! nothing that is not run.
#![cfg(feature = "pubsub")]
use crate::common;
use common::session::{Session, shell_blocks};

#[test]
fn the_books_shell_examples_run_as_written() {
    let mut ran = Vec::new();
    for file in common::markdown_in("docs/src") {
        let text = std::fs::read_to_string(&file).unwrap();
        let blocks = shell_blocks(&text);
        if blocks.is_empty() {
            continue;
        }
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let mut session = Session::new(&format!("docs/src/{name}"));
        for block in &blocks {
            session.run_block(block);
        }
        ran.push((name, blocks.len()));
    }
    // the chapters that show commands: a block lost to a changed fence
    // (```bash, ```console) would no longer run
    for chapter in ["standalone.md", "operations.md", "pubsub.md"] {
        assert!(
            ran.iter().any(|(name, _)| name == chapter),
            "{chapter} has no shell block: {ran:?}"
        );
    }
    let blocks: usize = ran.iter().map(|(_, n)| n).sum();
    assert!(blocks >= 6, "{ran:?}");
}

/// The book keeps its shell examples in ` ```sh ` fences, which the session
/// runs; another shell fence would be shown and never run.
#[test]
fn the_book_has_no_shell_block_the_session_skips() {
    for file in common::markdown_in("docs/src") {
        let text = std::fs::read_to_string(&file).unwrap();
        for fence in ["```bash", "```console", "```shell", "```shell-session"] {
            assert!(
                !text.lines().any(|l| l.trim() == fence),
                "{}: a {fence} block; write ```sh so its test runs it",
                file.display()
            );
        }
    }
}
