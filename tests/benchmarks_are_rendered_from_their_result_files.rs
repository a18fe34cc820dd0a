//! The benchmark chapter of the book prints only what its result files hold:
//! `benches/render.py --check` renders every block of
//! `docs/src/benchmarks.md` from `bench-results/` and fails when a block
//! differs — a figure typed into the chapter by hand, or a file changed
//! without rendering again.
#[test]
fn benchmarks_are_rendered_from_their_result_files() {
    let out = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/render.py"))
        .arg("--check")
        .output()
        .expect("python3 runs benches/render.py");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let chapter = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/benchmarks.md"
    ))
    .unwrap();
    let blocks = chapter.matches("<!-- rendered: ").count();
    assert!(blocks >= 7, "{blocks} rendered blocks");
    // every block holds a table
    for block in chapter.split("<!-- rendered: ").skip(1) {
        let body = block.split("<!-- end rendered -->").next().unwrap();
        assert!(body.contains("| --- "), "an empty block: {body}");
    }
}
