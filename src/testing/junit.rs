//! Test results as JUnit XML, the format CI systems read (GitHub Actions reporters,
//! GitLab, Jenkins, Buildkite, CircleCI): one `<testsuite>` per test file, one
//! `<testcase>` per case run, a `<failure>` per failing case with every failed
//! expectation and its explanation, and a file that could not be run as one
//! `<testcase>` holding an `<error>`.
//!
//! Attributes: `name`, `tests`, `failures`, `errors`, `skipped` (cases the filter left
//! out) and `time` (seconds) on suites; `name`, `classname` (the test file), `file`,
//! `line` and `time` on cases. Times are the only part that differs between two runs.

use std::io;
use std::time::Duration;

use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

use super::{CaseResult, FileResult, Results};

/// The report as XML bytes.
pub fn render(results: &Results) -> Vec<u8> {
    // Writing into a `Vec` cannot fail; an error would come from quick-xml itself.
    write(results).unwrap_or_default()
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// XML 1.0 cannot carry most control characters, even escaped.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

fn write(results: &Results) -> io::Result<Vec<u8>> {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let errors = results.file_errors().count() + results.unreadable.len();
    let time: Duration = results.files.iter().map(|f| f.time).sum();
    w.create_element("testsuites")
        .with_attributes([
            ("name", "ctxpack test"),
            (
                "tests",
                &(results.passed() + results.failed() + errors).to_string(),
            ),
            ("failures", &results.failed().to_string()),
            ("errors", &errors.to_string()),
            ("skipped", &results.filtered_out().to_string()),
            ("time", &secs(time)),
        ])
        .write_inner_content(|w| {
            for file in &results.files {
                suite(w, file)?;
            }
            for e in &results.unreadable {
                w.create_element("testsuite")
                    .with_attributes([
                        ("name", "ctxpack test"),
                        ("tests", "1"),
                        ("failures", "0"),
                        ("errors", "1"),
                        ("skipped", "0"),
                        ("time", "0.000"),
                    ])
                    .write_inner_content(|w| {
                        error_case(w, "(inputs)", "ctxpack test", e.kind, &e.message)
                    })?;
            }
            Ok(())
        })?;
    let mut bytes = w.into_inner();
    bytes.push(b'\n');
    Ok(bytes)
}

fn suite(w: &mut Writer<Vec<u8>>, file: &FileResult) -> io::Result<()> {
    let name = clean(&file.path.display().to_string());
    match &file.outcome {
        Err(e) => {
            w.create_element("testsuite")
                .with_attributes([
                    ("name", name.as_str()),
                    ("tests", "1"),
                    ("failures", "0"),
                    ("errors", "1"),
                    ("skipped", &file.filtered_out.to_string()),
                    ("time", &secs(file.time)),
                ])
                .write_inner_content(|w| error_case(w, "(test file)", &name, e.kind, &e.message))?;
        }
        Ok(cases) => {
            let failures = cases.iter().filter(|c| !c.passed()).count();
            w.create_element("testsuite")
                .with_attributes([
                    ("name", name.as_str()),
                    ("tests", &cases.len().to_string()),
                    ("failures", &failures.to_string()),
                    ("errors", "0"),
                    ("skipped", &file.filtered_out.to_string()),
                    ("time", &secs(file.time)),
                ])
                .write_inner_content(|w| {
                    for case in cases {
                        testcase(w, &name, case)?;
                    }
                    Ok(())
                })?;
        }
    }
    Ok(())
}

fn testcase(w: &mut Writer<Vec<u8>>, file: &str, case: &CaseResult) -> io::Result<()> {
    let line = case.line.map(|l| l.to_string());
    let mut attributes = vec![
        ("name", clean(&case.name)),
        ("classname", file.to_owned()),
        ("file", file.to_owned()),
    ];
    if let Some(line) = line {
        attributes.push(("line", line));
    }
    attributes.push(("time", secs(case.time)));
    let element = w
        .create_element("testcase")
        .with_attributes(attributes.iter().map(|(k, v)| (*k, v.as_str())));
    if case.passed() {
        element.write_empty()?;
        return Ok(());
    }
    let summary = case
        .failures
        .iter()
        .map(|f| f.what.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let mut body = String::new();
    for f in &case.failures {
        body.push_str(&f.what);
        body.push('\n');
        for why in &f.why {
            body.push_str("  ");
            body.push_str(why);
            body.push('\n');
        }
    }
    if let Some(cmd) = &case.reproduce {
        body.push_str("reproduce: ");
        body.push_str(cmd);
        body.push('\n');
    }
    element.write_inner_content(|w| {
        w.create_element("failure")
            .with_attributes([
                ("message", clean(&summary).as_str()),
                ("type", "expectation"),
            ])
            .write_text_content(BytesText::new(&clean(&body)))?;
        Ok(())
    })?;
    Ok(())
}

fn error_case(
    w: &mut Writer<Vec<u8>>,
    name: &str,
    file: &str,
    kind: &str,
    message: &str,
) -> io::Result<()> {
    w.create_element("testcase")
        .with_attributes([("name", name), ("classname", file), ("time", "0.000")])
        .write_inner_content(|w| {
            w.create_element("error")
                .with_attributes([("message", clean(message).as_str()), ("type", kind)])
                .write_text_content(BytesText::new(&clean(message)))?;
            Ok(())
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Failure;
    use std::path::PathBuf;

    fn results() -> Results {
        let case = |name: &str, failures: Vec<Failure>| CaseResult {
            name: name.into(),
            line: Some(3),
            failures,
            reproduce: None,
            time: Duration::from_millis(2),
        };
        Results {
            files: vec![
                FileResult {
                    path: PathBuf::from("a <&> \"b\".tests.yaml"),
                    outcome: Ok(vec![
                        case("passes", vec![]),
                        case(
                            "fails \u{1}",
                            vec![Failure {
                                what: "tools: expected [\"x\"], actual []".into(),
                                why: vec!["`x` withheld: prohibited_by_pack".into()],
                            }],
                        ),
                    ]),
                    filtered_out: 1,
                    time: Duration::from_millis(5),
                },
                FileResult {
                    path: PathBuf::from("bad.tests.yaml"),
                    outcome: Err(crate::commands::compile::CliError::new(
                        "invalid_test_file",
                        4,
                        "line 1: missing `pack`",
                    )),
                    filtered_out: 0,
                    time: Duration::ZERO,
                },
            ],
            unreadable: vec![],
            untested_packs: vec![],
        }
    }

    #[test]
    fn escapes_and_counts() {
        let xml = String::from_utf8(render(&results())).unwrap();
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
        assert!(xml.contains(
            r#"<testsuites name="ctxpack test" tests="3" failures="1" errors="1" skipped="1""#
        ));
        assert!(
            xml.contains(r#"name="a &lt;&amp;&gt; &quot;b&quot;.tests.yaml""#),
            "{xml}"
        );
        assert!(xml.contains("name=\"fails \u{FFFD}\""), "{xml}");
        assert!(xml.contains("`x` withheld: prohibited_by_pack"), "{xml}");
        assert!(
            xml.contains(r#"<error message="line 1: missing `pack`" type="invalid_test_file">"#),
            "{xml}"
        );
    }
}
