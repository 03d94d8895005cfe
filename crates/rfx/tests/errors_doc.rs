//! Keeps `docs/errors.md` complete. Reads the Rust sources of every workspace crate, finds each
//! `pub enum` that derives `thiserror::Error` and its variants, and checks that the page names
//! every one as `Enum::Variant`. Enum names defined in more than one module (the three
//! `VerifyErrorKind`s) must be qualified with the module: `hir::VerifyErrorKind::Type`. Also
//! checks that every public `thiserror` struct is named, and that the page names no variant
//! that does not exist (so renames and removals show up too).
//!
//! The parser is line-based and relies on rustfmt's layout: variants are the lines at the
//! body's outermost indentation that start with an identifier followed by `{`, `(`, `,` (or
//! `=`, or nothing for a last variant without a comma); doc comments, comments and attributes
//! (including multi-line ones) are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A public `thiserror` enum found in the sources.
#[derive(Debug, PartialEq, Eq)]
struct ErrorEnum {
    name: String,
    variants: Vec<String>,
}

/// The public `thiserror` enums and structs of one source file.
#[derive(Debug, Default, PartialEq, Eq)]
struct ErrorTypes {
    enums: Vec<ErrorEnum>,
    structs: Vec<String>,
}

/// An enum together with where it is defined.
#[derive(Debug)]
struct FoundEnum {
    enum_: ErrorEnum,
    /// The module a user names it through when the name is ambiguous (`hir`, `mir`, `lir`),
    /// taken from the first directory under `src/`, or the crate name for files at the top.
    module: String,
    file: PathBuf,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The change in `[`/`]` nesting over `line`, ignoring brackets inside string and character
/// literals (error messages such as `"{0:?}"` or `"[...]"`).
fn bracket_delta(line: &str) -> i32 {
    let mut delta = 0;
    let mut in_string = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '\'' if !in_string => {
                // A char literal such as '[' (a lifetime has no closing quote two chars on).
                let mut ahead = chars.clone();
                if let (Some(_), Some('\'')) = (ahead.next(), ahead.next()) {
                    chars.next();
                    chars.next();
                }
            }
            '[' if !in_string => delta += 1,
            ']' if !in_string => delta -= 1,
            _ => {}
        }
    }
    delta
}

/// The lines of an attribute starting at `lines[start]` (which starts with `#[`), joined, and
/// the index of the line after it.
fn read_attribute(lines: &[&str], start: usize) -> (String, usize) {
    let mut text = String::new();
    let mut depth = 0;
    let mut index = start;
    while index < lines.len() {
        text.push_str(lines[index].trim());
        text.push(' ');
        depth += bracket_delta(lines[index]);
        index += 1;
        if depth <= 0 {
            break;
        }
    }
    (text, index)
}

/// The identifier at the start of `text` and the rest, if `text` starts with one.
fn leading_identifier(text: &str) -> Option<(&str, &str)> {
    let first = text.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    Some((&text[..end], &text[end..]))
}

/// The variants of the enum whose header is `lines[header]` (the line ending in `{`), and the
/// index of the line after its closing brace.
fn parse_enum_body(lines: &[&str], header: usize) -> (Vec<String>, usize) {
    let enum_indent = indentation(lines[header]);
    let mut end = header + 1;
    while end < lines.len() && !(lines[end].trim() == "}" && indentation(lines[end]) == enum_indent) {
        end += 1;
    }
    let body = &lines[header + 1..end.min(lines.len())];
    let Some(level) = body
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| indentation(line))
        .min()
    else {
        return (Vec::new(), end + 1);
    };
    let mut variants = Vec::new();
    let mut index = 0;
    while index < body.len() {
        let line = body[index];
        let text = line.trim();
        if indentation(line) != level || text.is_empty() || text.starts_with("//") {
            index += 1;
            continue;
        }
        if text.starts_with("#[") {
            index = read_attribute(body, index).1;
            continue;
        }
        if let Some((name, rest)) = leading_identifier(text) {
            let rest = rest.trim_start();
            if rest.is_empty() || rest.starts_with(['{', '(', ',', '=']) {
                variants.push(name.to_string());
            }
        }
        index += 1;
    }
    (variants, end + 1)
}

/// The name declared by `item` (`pub enum JobError<E> {` → `JobError`).
fn item_name(item: &str) -> Option<String> {
    leading_identifier(item).map(|(name, _)| name.to_string())
}

/// Every `pub enum` and `pub struct` in `source` that derives `thiserror::Error`.
fn parse_error_types(source: &str) -> ErrorTypes {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = ErrorTypes::default();
    let mut derives_error = false;
    let mut index = 0;
    while index < lines.len() {
        let text = lines[index].trim();
        if text.starts_with("#[") {
            let (attribute, next) = read_attribute(&lines, index);
            if attribute.starts_with("#[derive(") && attribute.contains("thiserror::Error") {
                derives_error = true;
            }
            index = next;
            continue;
        }
        if text.is_empty() || text.starts_with("//") {
            index += 1;
            continue;
        }
        if derives_error {
            if let Some(item) = text.strip_prefix("pub enum ") {
                let name = item_name(item).expect("an enum name");
                let mut header = index;
                while header < lines.len() && !lines[header].trim_end().ends_with('{') {
                    header += 1;
                }
                let (variants, next) = parse_enum_body(&lines, header);
                found.enums.push(ErrorEnum { name, variants });
                derives_error = false;
                index = next;
                continue;
            }
            if let Some(item) = text.strip_prefix("pub struct ") {
                found.structs.push(item_name(item).expect("a struct name"));
            }
        }
        derives_error = false;
        index += 1;
    }
    found
}

/// `true` when `text[at..]` starts a whole name: the character before (if any) does not
/// continue an identifier.
fn starts_name(text: &str, at: usize) -> bool {
    !text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `true` when `text` contains `name` as a whole path (not a prefix or suffix of a longer
/// identifier).
fn contains_name(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let after = text[at + name.len()..].chars().next();
        starts_name(text, at) && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn workspace_error_types() -> (Vec<FoundEnum>, Vec<(String, PathBuf)>) {
    let root = workspace_root();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("reading crates/")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.join("src").is_dir())
        .collect();
    crates.sort();
    let mut enums = Vec::new();
    let mut structs = Vec::new();
    for krate in crates {
        let crate_name = krate
            .file_name()
            .and_then(|name| name.to_str())
            .expect("a crate directory name")
            .replace('-', "_");
        let src = krate.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let source = std::fs::read_to_string(&file).expect("reading a source file");
            let relative = file.strip_prefix(&src).expect("a file under src/");
            let module = match relative.components().count() {
                1 => crate_name.clone(),
                _ => relative
                    .components()
                    .next()
                    .and_then(|c| c.as_os_str().to_str())
                    .expect("a module directory")
                    .to_string(),
            };
            let found = parse_error_types(&source);
            let shown = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
            enums.extend(found.enums.into_iter().map(|enum_| FoundEnum {
                enum_,
                module: module.clone(),
                file: shown.clone(),
            }));
            structs.extend(found.structs.into_iter().map(|name| (name, shown.clone())));
        }
    }
    (enums, structs)
}

#[test]
fn the_parser_finds_error_enums_variants_and_structs() {
    let source = r#"
use thiserror::Error as _;

/// Not an error.
#[derive(Clone, Debug)]
pub enum Plain {
    A,
    B,
}

/// Two lines of derive.
#[derive(
    Clone, Debug,
    thiserror::Error,
)]
#[non_exhaustive]
pub enum Multi<E> {
    /// A struct variant with a nested brace in its message.
    #[error("`{op}` takes {expected} [operands]")]
    Arity {
        /// The op.
        op: &'static str,
        /// Brace-looking field: {
        expected: usize,
    },
    // A plain comment.
    #[error(
        "a long message on its own line, with Fake, and Fake2 { x }"
    )]
    Tuple(E),
    #[error("unit")]
    Unit,
    #[error("last")]
    Last
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum Private {
    #[error("x")]
    Hidden,
}

#[derive(Debug, thiserror::Error)]
#[error("{line}: {message}")]
pub struct Located {
    pub line: usize,
    pub message: String,
}

mod inner {
    #[derive(Debug, thiserror::Error)]
    pub enum Nested {
        #[error("one")]
        One(#[from] std::io::Error),
        #[error("two")]
        Two { inner: Vec<[u8; 2]> },
    }
}
"#;
    assert_eq!(
        parse_error_types(source),
        ErrorTypes {
            enums: vec![
                ErrorEnum {
                    name: "Multi".to_string(),
                    variants: ["Arity", "Tuple", "Unit", "Last"].map(String::from).to_vec(),
                },
                ErrorEnum {
                    name: "Nested".to_string(),
                    variants: ["One", "Two"].map(String::from).to_vec(),
                },
            ],
            structs: vec!["Located".to_string()],
        }
    );
    assert!(contains_name(
        "see `hir::VerifyErrorKind::Type`.",
        "VerifyErrorKind::Type"
    ));
    assert!(!contains_name("`TypeError::ArityX`", "TypeError::Arity"));
    assert!(!contains_name("`MyTypeError::Arity`", "TypeError::Arity"));
}

#[test]
fn errors_md_names_every_variant_of_every_public_error_enum() {
    let doc_path = workspace_root().join("docs/errors.md");
    let doc =
        std::fs::read_to_string(&doc_path).unwrap_or_else(|e| panic!("reading {}: {e}", doc_path.display()));
    let (enums, structs) = workspace_error_types();

    // Guard against a parser that silently finds nothing.
    let names: BTreeSet<&str> = enums.iter().map(|e| e.enum_.name.as_str()).collect();
    for expected in [
        "RuntimeError",
        "CallError",
        "BackendError",
        "JitError",
        "VerifyErrorKind",
    ] {
        assert!(
            names.contains(expected),
            "the scan did not find `{expected}`: {names:?}"
        );
    }
    let variant_count: usize = enums.iter().map(|e| e.enum_.variants.len()).sum();
    assert!(
        enums.len() >= 15 && variant_count >= 100,
        "the scan found only {} enums with {variant_count} variants",
        enums.len()
    );

    let mut defined_in: BTreeMap<&str, usize> = BTreeMap::new();
    for found in &enums {
        *defined_in.entry(found.enum_.name.as_str()).or_default() += 1;
    }
    let qualified = |found: &FoundEnum| {
        if defined_in[found.enum_.name.as_str()] > 1 {
            format!("{}::{}", found.module, found.enum_.name)
        } else {
            found.enum_.name.clone()
        }
    };

    let mut missing = Vec::new();
    for found in &enums {
        let path = qualified(found);
        for variant in &found.enum_.variants {
            let name = format!("{path}::{variant}");
            if !contains_name(&doc, &name) {
                missing.push(format!("`{name}` (defined in {})", found.file.display()));
            }
        }
    }
    for (name, file) in &structs {
        if !contains_name(&doc, name) {
            missing.push(format!(
                "the error struct `{name}` (defined in {})",
                file.display()
            ));
        }
    }

    // Names on the page that look like variants (`Enum::Upper...`) of a scanned enum must exist.
    let mut stale = Vec::new();
    for found in &enums {
        let path = qualified(found);
        let prefix = format!("{path}::");
        for (at, _) in doc.match_indices(&prefix) {
            if !starts_name(&doc, at) {
                continue;
            }
            let Some((variant, _)) = leading_identifier(&doc[at + prefix.len()..]) else {
                continue;
            };
            let looks_like_variant = variant.starts_with(|c: char| c.is_ascii_uppercase());
            if looks_like_variant && !found.enum_.variants.iter().any(|v| v == variant) {
                stale.push(format!("`{prefix}{variant}`"));
            }
        }
    }
    stale.sort();
    stale.dedup();

    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/errors.md is out of date.\nMissing ({}):\n  {}\nNamed but not defined ({}):\n  {}",
        missing.len(),
        missing.join("\n  "),
        stale.len(),
        stale.join("\n  ")
    );
}

/// The text of every test in the workspace: the files under each crate's `tests/`, test-only
/// source files (`tests.rs`, anything under a `tests/` module directory), and the part of every
/// other source file from its first `#[cfg(test)]` on.
fn workspace_test_sources() -> Vec<(PathBuf, String)> {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in [root.join("crates"), root.join("xtask")] {
        rust_files(&dir, &mut files);
    }
    let mut sources = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("reading a source file");
        let relative = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
        let in_tests_dir = relative.components().any(|c| c.as_os_str() == "tests");
        let is_test_file = in_tests_dir || file.file_name().is_some_and(|n| n == "tests.rs");
        let test_part = if is_test_file {
            text
        } else {
            match text.find("#[cfg(test)]") {
                Some(at) => text[at..].to_string(),
                None => continue,
            }
        };
        sources.push((relative, test_part));
    }
    sources
}

#[test]
fn every_error_variant_is_named_by_a_test() {
    let (enums, _) = workspace_error_types();
    let tests = workspace_test_sources();
    assert!(tests.len() > 50, "found only {} test sources", tests.len());
    // This file names every variant in its messages and fixtures; it proves nothing about them.
    let this_file = Path::new(file!())
        .file_name()
        .map(|n| n.to_os_string())
        .expect("this file's name");
    let tests: Vec<&(PathBuf, String)> = tests
        .iter()
        .filter(|(path, _)| path.file_name() != Some(this_file.as_os_str()))
        .collect();

    let mut defined_in: BTreeMap<&str, usize> = BTreeMap::new();
    for found in &enums {
        *defined_in.entry(found.enum_.name.as_str()).or_default() += 1;
    }
    let mut missing = Vec::new();
    for found in &enums {
        let name = &found.enum_.name;
        for variant in &found.enum_.variants {
            let plain = format!("{name}::{variant}");
            // An enum name defined in several modules (`hir`/`mir`/`lir::VerifyErrorKind`) must
            // be qualified where the variant name is shared, or found in a file of its module.
            let ambiguous = defined_in[name.as_str()] > 1
                && enums.iter().any(|other| {
                    other.enum_.name == *name
                        && other.module != found.module
                        && other.enum_.variants.contains(variant)
                });
            let qualified = format!("{}::{plain}", found.module);
            let named = tests.iter().any(|(path, text)| {
                if contains_name(text, &qualified) {
                    return true;
                }
                if !contains_name(text, &plain) {
                    return false;
                }
                if !ambiguous {
                    return true;
                }
                path.components().any(|c| c.as_os_str() == found.module.as_str())
                    || path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(found.module.as_str()))
            });
            if !named {
                missing.push(format!("{qualified} (defined in {})", found.file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} public error variants are raised by no test (no test names them):\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}
