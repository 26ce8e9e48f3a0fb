//! The layer rule of the crate doc, checked: every `crate::<module>` path in non-test code
//! names a module on a line above the importing module's own line in `lib.rs`'s "Layers" list.
//!
//! Why a test: an import that points down the list is how circles between folders start (two
//! existed before the program layer: control ↔ proxy, load → replay/report → load), and a
//! reviewer does not see one in a diff. The reader is lexical on purpose (comments, strings and
//! `#[cfg(test)]` items removed, then `crate::` paths read), so it needs no parser and reads
//! exactly what the compiler would resolve for `crate::` paths.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top-level module name → its line number in the crate doc's "Layers" list.
fn layers(lib_rs: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in lib_rs.lines() {
        let Some(item) = line.strip_prefix("//! ") else {
            continue;
        };
        let Some((num, rest)) = item.split_once(". ") else {
            continue;
        };
        let Ok(n) = num.trim().parse::<usize>() else {
            continue;
        };
        let head = rest.split(':').next().unwrap_or("");
        for name in head.split('`').skip(1).step_by(2) {
            out.insert(name.to_string(), n);
        }
    }
    out
}

/// `src` with comments and string/char literals blanked and `#[cfg(test)]` items removed
/// (also used by `audit::imports`).
pub(crate) fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |j| i + j);
        } else if src[i..].starts_with("/*") {
            i = src[i + 2..].find("*/").map_or(b.len(), |j| i + 2 + j + 2);
        } else if src[i..].starts_with("r#\"") {
            i = src[i + 3..].find("\"#").map_or(b.len(), |j| i + 3 + j + 2);
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if b[i] == b'\'' && is_char_literal(&b[i..]) {
            let close = if b[i + 1] == b'\\' { i + 3 } else { i + 2 };
            i = b[close..]
                .iter()
                .position(|&c| c == b'\'')
                .map_or(b.len(), |j| close + j + 1);
            out.push_str("' '");
        } else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    remove_test_items(&out)
}

/// `'x'` or `'\…'`, not a lifetime (`'a`).
fn is_char_literal(b: &[u8]) -> bool {
    match b.get(1) {
        Some(b'\\') => true,
        Some(_) => {
            let width = std::str::from_utf8(&b[1..b.len().min(5)])
                .ok()
                .or_else(|| std::str::from_utf8(&b[1..2]).ok())
                .and_then(|s| s.chars().next())
                .map_or(1, char::len_utf8);
            b.get(1 + width) == Some(&b'\'')
        }
        None => false,
    }
}

/// Removes each `#[cfg(test)]` item: up to its `;`, or its `{ … }` block.
fn remove_test_items(src: &str) -> String {
    const TAG: &str = "#[cfg(test)]";
    let mut s = src.to_string();
    while let Some(k) = s.find(TAG) {
        let after = k + TAG.len();
        let Some(rel) = s[after..].find(['{', ';']) else {
            s.truncate(k);
            break;
        };
        let open = after + rel;
        if s.as_bytes()[open] == b';' {
            s.replace_range(k..=open, "");
            continue;
        }
        let mut depth = 0usize;
        let mut end = s.len();
        for (j, c) in s[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        s.replace_range(k..end, "");
    }
    s
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files only compiled for tests: `#[cfg(test)] #[path = "x.rs"] mod tests;` and, in a
/// `mod.rs`, `#[cfg(test)] mod x;` declarations.
fn test_only_files(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for f in files {
        let src = std::fs::read_to_string(f).unwrap_or_default();
        let is_mod_rs = f.file_name().is_some_and(|n| n == "mod.rs");
        let mut lines = src.lines().peekable();
        while let Some(line) = lines.next() {
            if line.trim() != "#[cfg(test)]" {
                continue;
            }
            let (Some(next), Some(parent)) = (lines.peek(), f.parent()) else {
                continue;
            };
            if let Some(rest) = next.trim().strip_prefix("#[path = \"")
                && let Some(name) = rest.strip_suffix("\"]")
            {
                out.push(parent.join(name));
            } else if is_mod_rs
                && let Some(name) = next.trim().strip_prefix("mod ")
                && let Some(name) = name.strip_suffix(';')
            {
                out.push(parent.join(format!("{name}.rs")));
            }
        }
    }
    out
}

/// (importer, imported, file) for every downward-pointing `crate::` path.
fn violations(src_dir: &Path) -> Vec<(String, String, String)> {
    let lib = std::fs::read_to_string(src_dir.join("lib.rs")).expect("read src/lib.rs");
    let layer = layers(&lib);
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    let skip = test_only_files(&files);
    let mut bad = Vec::new();
    for f in files.iter().filter(|f| !skip.contains(f)) {
        let rel = f.strip_prefix(src_dir).unwrap_or(f);
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_string();
        if matches!(top.as_str(), "lib" | "main" | "layers") {
            continue;
        }
        let Some(&own) = layer.get(&top) else {
            bad.push((
                top.clone(),
                "(not in the Layers list of lib.rs)".into(),
                rel.display().to_string(),
            ));
            continue;
        };
        let code = strip(&std::fs::read_to_string(f).unwrap_or_default());
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() || name == top {
                continue;
            }
            let ok = layer.get(&name).is_some_and(|&l| l < own);
            if !ok {
                bad.push((top.clone(), name, rel.display().to_string()));
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

#[test]
fn no_module_imports_a_module_at_or_above_its_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    assert!(
        bad.is_empty(),
        "imports that break the layer order of src/lib.rs (importer -> imported in file):\n{}",
        bad.iter()
            .map(|(a, b, f)| format!("  {a} -> {b}  in src/{f}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_layer_reader_sees_what_the_compiler_sees() {
    let code = strip(
        "use crate::wire::X; // crate::cmd\n/* crate::cmd */ let s = \"crate::cmd\";\n\
         let c = '\"'; fn f<'a>() {}\n#[cfg(test)]\nmod tests { use crate::cmd::Y; }\n\
         #[cfg(test)]\nuse crate::cmd::Z;\nuse crate::fault::W;",
    );
    assert!(code.contains("crate::wire::X") && code.contains("crate::fault::W"));
    assert!(!code.contains("crate::cmd"), "{code}");
    let layer = layers("//! 1. [`vocab`], [`units`]: a: b\n//! 2. `tls`: c\n");
    assert_eq!(layer.get("units"), Some(&1));
    assert_eq!(layer.get("tls"), Some(&2));
    assert_eq!(layer.len(), 3);
}

#[test]
fn an_import_down_the_list_is_reported_with_its_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("wire")).expect("mkdir");
    std::fs::write(
        src.join("lib.rs"),
        "//! 1. [`vocab`]: bottom\n//! 2. [`wire`]: middle\n//! 3. [`cmd`]: top\n",
    )
    .expect("write lib.rs");
    std::fs::write(src.join("vocab.rs"), "pub struct V;\n").expect("write");
    std::fs::write(
        src.join("cmd.rs"),
        "use crate::wire::W;\nuse crate::vocab::V;\n",
    )
    .expect("write");
    std::fs::write(
        src.join("wire/mod.rs"),
        "use crate::vocab::V;\nfn f() { crate::cmd::run(); }\n#[cfg(test)]\nmod t { use crate::cmd::X; }\n",
    )
    .expect("write");
    assert_eq!(
        violations(src),
        vec![(
            "wire".to_string(),
            "cmd".to_string(),
            "wire/mod.rs".to_string()
        )]
    );
}
