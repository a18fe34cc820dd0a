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

/// Outside rendered blocks and code, the README and the book type no
/// measured rate, ratio or short time (`… /s`, `…×`, `… µs`, `… ns`): such a
/// figure comes from a result file through `benches/render.py` or is not
/// printed.
#[test]
fn no_measured_figure_is_typed_outside_a_rendered_block() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    files.extend(crate::common::markdown_in("docs/src"));
    let mut typed = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // rendered blocks and fenced code are left out
        let mut outside = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("<!-- rendered: ") {
            outside.push_str(&rest[..at]);
            rest = rest[at..]
                .split_once("<!-- end rendered -->")
                .map_or("", |(_, after)| after);
        }
        outside.push_str(rest);
        for line in crate::common::prose_lines(&outside) {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                let number = |s: &str| {
                    s.trim_start_matches(['(', '~'])
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_digit())
                };
                let figure = (number(w)
                    && (w.ends_with('×') || w.ends_with("×,") || w.ends_with("×)")))
                    || (number(w)
                        && words.get(i + 1).is_some_and(|u| {
                            ["/s", "µs", "ns", "k/s"].iter().any(|x| u.starts_with(x))
                        }))
                    || (number(w) && (w.contains("/s") || w.ends_with("µs")));
                if figure {
                    typed.push(format!("{}: {line}", file.display()));
                }
            }
        }
    }
    assert!(typed.is_empty(), "figures typed by hand: {typed:#?}");
}
