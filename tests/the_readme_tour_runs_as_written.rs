//! The README's five-minute tour runs as written (`common::session`): the
//! shell blocks of its section, in order, on one fresh database, each line
//! saying what its `# outcome:` comment says; `postfach run` serves on a free
//! port until it is ready.
#![cfg(feature = "server")]
use crate::common;
use common::session::{Session, shell_blocks, words};

#[test]
fn the_readme_tour_runs_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let heading = "Five minutes with postfach";
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("the README has a section '{heading}'"));
    let blocks = shell_blocks(section);
    let commands = blocks.iter().flatten().filter(|l| !words(l).0.is_empty());
    assert!(commands.count() >= 10, "{blocks:?}");
    let outcomes = blocks
        .iter()
        .flatten()
        .filter(|l| l.contains("# outcome: "));
    assert!(outcomes.count() >= 4, "{blocks:?}");
    let mut session = Session::new("README.md");
    for block in &blocks {
        session.run_block(block);
    }
}
