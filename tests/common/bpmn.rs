//! The BPMN skeleton every inline test model shares.

/// A BPMN document: the body (messages, signals, errors, processes …) inside
/// a `<definitions>` that declares BPMN's namespace, written exactly as the
/// text the models had inline (the body's lines keep their line numbers).
/// Expands to a string literal, so it serves `const`s and `format!` alike:
///
/// ```ignore
/// const MODEL: &str = bpmn!(r#"
///   <process id="p" isExecutable="true"> … </process>
/// "#);
/// ```
#[macro_export]
macro_rules! bpmn {
    ($body:literal) => {
        concat!(
            r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">"#,
            $body,
            "</definitions>"
        )
    };
}
