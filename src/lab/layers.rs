//! The lab's layer rule (see the module doc of [`super`]), checked: every path of non-test
//! code that names a lab module (`super::…`, `crate::lab::…`, `self::…`, or a child module
//! declared in the same file) must name a module of a lower layer of [`super::LAB_LAYERS`], or
//! one of its own layer without closing a circle.
//!
//! Why a test: the lab grew as one 14-file circle (`config` → `bugs` → `session` → `config`,
//! `http` ↔ `post`, `post` ↔ `stateless`, …), and a reviewer does not see a new edge of a
//! circle in a diff. The reader is lexical on purpose, like `crate::layers` (comments, strings
//! and `#[cfg(test)]` items removed, then paths read, `use` groups expanded), so it needs no
//! parser and reads what the compiler resolves for those paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::layers::strip;

/// The unit standing for the lab's root file (`mod.rs`) and the items it defines.
const ROOT: &str = "mod";

/// One import of a lab file: where it is and what it names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    file: String,
    from: String,
    to: String,
    path: String,
}

/// Unit name → layer number (1 = bottom); the root is on top unless listed.
fn layer_of(layers: &[&[&str]]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (i, units) in layers.iter().enumerate() {
        for u in *units {
            out.insert((*u).to_string(), i + 1);
        }
    }
    out.entry(ROOT.to_string()).or_insert(layers.len() + 1);
    out
}

/// The unit a module path (segments below the lab) belongs to: the longest listed prefix, or
/// the root when the first segment names no listed unit (an item of `mod.rs`).
fn unit_of(segs: &[String], layer: &BTreeMap<String, usize>) -> Option<String> {
    for n in (1..=segs.len().min(2)).rev() {
        let name = segs[..n].join("::");
        if layer.contains_key(&name) {
            return Some(name);
        }
    }
    let first = segs.first()?;
    let known = layer.keys().any(|u| u.split("::").next() == Some(first));
    (!known).then(|| ROOT.to_string())
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

/// The module path (below the lab) of a file relative to the lab's folder.
fn module_path(rel: &Path) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .map(|s| s.trim_end_matches(".rs").to_string())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// Files only compiled for tests: `#[cfg(test)] mod x;` and `#[cfg(test)] #[path = "x.rs"]`.
fn test_only(file: &Path, src: &str) -> Vec<PathBuf> {
    let Some(parent) = file.parent() else {
        return Vec::new();
    };
    let own = file.file_name().is_some_and(|n| n == "mod.rs");
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let dir = if own {
        parent.to_path_buf()
    } else {
        parent.join(stem)
    };
    let mut out = Vec::new();
    let mut lines = src.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        let Some(next) = lines.peek().map(|l| l.trim()) else {
            continue;
        };
        if let Some(name) = next
            .strip_prefix("#[path = \"")
            .and_then(|r| r.strip_suffix("\"]"))
        {
            out.push(parent.join(name));
        } else if let Some(name) = next
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|r| r.strip_suffix(';'))
        {
            out.push(dir.join(format!("{name}.rs")));
            out.push(dir.join(name).join("mod.rs"));
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn skip_ws(s: &[u8], i: &mut usize) {
    while *i < s.len() && s[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

/// Reads one use tree at `i` (`a::b`, `a::{b, c::d}`, `*`, `self`), each full path appended
/// to `prefix` into `out`. Always advances or stops at the end of `s`.
fn tree(s: &[u8], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    loop {
        skip_ws(s, i);
        if s.get(*i) == Some(&b'{') {
            *i += 1;
            loop {
                skip_ws(s, i);
                match s.get(*i) {
                    None => return,
                    Some(b'}') => {
                        *i += 1;
                        return;
                    }
                    Some(_) => {}
                }
                let before = *i;
                tree(s, i, prefix.clone(), out);
                // `as Alias` and anything else up to the next item.
                while *i < s.len() && s[*i] != b',' && s[*i] != b'}' {
                    *i += 1;
                }
                if s.get(*i) == Some(&b',') {
                    *i += 1;
                }
                if *i == before {
                    *i += 1;
                }
            }
        }
        let start = *i;
        while *i < s.len() && (is_ident(s[*i]) || s[*i] == b'*') {
            *i += 1;
        }
        if *i == start {
            out.push(prefix);
            return;
        }
        prefix.push(String::from_utf8_lossy(&s[start..*i]).into_owned());
        skip_ws(s, i);
        if s[*i..].starts_with(b"::") {
            *i += 2;
        } else {
            out.push(prefix);
            return;
        }
    }
}

/// Child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.split_once("mod ")?;
            let head = rest.0.trim();
            if !(head.is_empty() || head.starts_with("pub")) {
                return None;
            }
            let name = rest.1.strip_suffix(';')?.trim();
            name.bytes().all(is_ident).then(|| name.to_string())
        })
        .collect()
}

/// Every lab path in `code` (a file at module path `own`), as segments below the lab, with the
/// text that named it.
fn lab_paths(code: &str, own: &[String]) -> Vec<(Vec<String>, String)> {
    let s = code.as_bytes();
    let kids = children(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let after_path = i > 0 && (is_ident(s[i - 1]) || s[i - 1] == b':');
        if after_path || !is_ident(s[i]) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let base: Option<(Vec<String>, usize)> = if rest.starts_with("crate::lab::") {
            Some((Vec::new(), "crate::lab::".len()))
        } else if rest.starts_with("super::") {
            let mut at = 0;
            let mut up = 0;
            while code[i + at..].starts_with("super::") {
                at += "super::".len();
                up += 1;
            }
            // `own` is below the lab; the lab's root is at depth 0, outside it is not ours.
            own.len()
                .checked_sub(up)
                .map(|keep| (own[..keep].to_vec(), at))
        } else if rest.starts_with("self::") {
            Some((own.to_vec(), "self::".len()))
        } else {
            kids.iter()
                .find(|k| rest.starts_with(k.as_str()) && rest[k.len()..].starts_with("::"))
                .map(|_| (own.to_vec(), 0))
        };
        let Some((prefix, skip)) = base else {
            i += 1;
            continue;
        };
        let mut j = i + skip;
        let mut found = Vec::new();
        tree(s, &mut j, prefix, &mut found);
        let text: String = code[i..j.max(i + 1).min(code.len())]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for p in found.into_iter().filter(|p| !p.is_empty()) {
            out.push((p, text.clone()));
        }
        i = j.max(i + 1);
    }
    out
}

/// Every import between units of the lab under `lab_dir`, and the files no unit holds.
fn imports(lab_dir: &Path, layers: &[&[&str]]) -> (Vec<Import>, Vec<String>) {
    let layer = layer_of(layers);
    let mut files = Vec::new();
    rust_files(lab_dir, &mut files);
    let mut skip = Vec::new();
    for f in &files {
        skip.extend(test_only(
            f,
            &std::fs::read_to_string(f).unwrap_or_default(),
        ));
    }
    let mut found = Vec::new();
    let mut unlisted = Vec::new();
    for f in files.iter().filter(|f| !skip.contains(f)) {
        let rel = f.strip_prefix(lab_dir).unwrap_or(f);
        let own = module_path(rel);
        let from = if own.is_empty() {
            Some(ROOT.to_string())
        } else {
            unit_of(&own, &layer).filter(|u| u != ROOT)
        };
        let Some(from) = from else {
            unlisted.push(rel.display().to_string());
            continue;
        };
        let code = strip(&std::fs::read_to_string(f).unwrap_or_default());
        for (segs, text) in lab_paths(&code, &own) {
            let Some(to) = unit_of(&segs, &layer) else {
                continue;
            };
            if to != from {
                found.push(Import {
                    file: rel.display().to_string(),
                    from: from.clone(),
                    to,
                    path: text,
                });
            }
        }
    }
    found.sort();
    found.dedup();
    (found, unlisted)
}

/// What breaks the layer rule, one line each: imports of a higher layer, circles within a
/// layer (every import on one), files in no unit, and units with no file.
fn violations(lab_dir: &Path, layers: &[&[&str]]) -> Vec<String> {
    let layer = layer_of(layers);
    let (found, unlisted) = imports(lab_dir, layers);
    let mut bad: Vec<String> = unlisted
        .iter()
        .map(|f| format!("{f}: in no unit of LAB_LAYERS"))
        .collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for imp in &found {
        seen.insert(imp.from.clone());
        let (a, b) = (layer[&imp.from], layer[&imp.to]);
        if b > a {
            bad.push(format!(
                "{}: `{}` (layer {a}) imports `{}` (layer {b}) by `{}`",
                imp.file, imp.from, imp.to, imp.path
            ));
        } else if a == b {
            edges
                .entry(imp.from.clone())
                .or_default()
                .insert(imp.to.clone());
        }
    }
    let reach = |from: &str, to: &str| -> bool {
        let mut stack = vec![from.to_string()];
        let mut visited = BTreeSet::new();
        while let Some(u) = stack.pop() {
            if u == to {
                return true;
            }
            if visited.insert(u.clone()) {
                stack.extend(edges.get(&u).into_iter().flatten().cloned());
            }
        }
        false
    };
    for imp in &found {
        if layer[&imp.from] == layer[&imp.to] && reach(&imp.to, &imp.from) {
            bad.push(format!(
                "{}: `{}` imports `{}` by `{}`, and `{}` leads back to `{}` (a circle in layer {})",
                imp.file, imp.from, imp.to, imp.path, imp.to, imp.from, layer[&imp.from]
            ));
        }
    }
    let mut files = Vec::new();
    rust_files(lab_dir, &mut files);
    let held: BTreeSet<String> = files
        .iter()
        .filter_map(|f| {
            let own = module_path(f.strip_prefix(lab_dir).ok()?);
            Some(if own.is_empty() {
                ROOT.to_string()
            } else {
                unit_of(&own, &layer)?
            })
        })
        .collect();
    for u in layer.keys().filter(|u| !held.contains(*u)) {
        bad.push(format!("LAB_LAYERS names `{u}`, which no file holds"));
    }
    bad
}

#[test]
fn no_lab_module_imports_a_higher_layer_or_closes_a_circle() {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lab");
    let bad = violations(&lab, super::LAB_LAYERS);
    assert!(
        bad.is_empty(),
        "imports that break the layer order of LAB_LAYERS (src/lab/mod.rs):\n{}",
        bad.iter()
            .map(|b| format!("  src/lab/{b}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_lab_module_doc_names_every_unit_of_lab_layers() {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lab/mod.rs");
    let doc: String = std::fs::read_to_string(lab)
        .expect("read src/lab/mod.rs")
        .lines()
        .filter(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let missing: Vec<&str> = super::LAB_LAYERS
        .iter()
        .flat_map(|l| l.iter().copied())
        .filter(|u| *u != ROOT && !doc.contains(&format!("`{u}`")))
        .collect();
    assert!(missing.is_empty(), "not in the module doc: {missing:?}");
}

#[test]
fn use_groups_and_super_chains_resolve_to_lab_modules() {
    let code = "use super::{config::X, bugs::{self, Y as Z}, Shared};\n\
                fn f() { super::super::llm::knobs::K::new(); crate::lab::ring::R; knobs::KNOB; }\n\
                mod knobs;\nuse crate::vocab::V;\n";
    let own = vec!["llm".to_string(), "chat".to_string()];
    let got: Vec<Vec<String>> = lab_paths(code, &own).into_iter().map(|(p, _)| p).collect();
    let want = [
        vec!["llm", "config", "X"],
        vec!["llm", "bugs", "self"],
        vec!["llm", "bugs", "Y"],
        vec!["llm", "Shared"],
        vec!["llm", "knobs", "K", "new"],
        vec!["ring", "R"],
        vec!["llm", "chat", "knobs", "KNOB"],
    ];
    let want: Vec<Vec<String>> = want
        .iter()
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(got, want);
    let layer = layer_of(&[&["config", "llm::knobs"], &["llm"]]);
    let unit = |p: &[&str]| unit_of(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &layer);
    assert_eq!(
        unit(&["llm", "knobs", "Knobs"]).as_deref(),
        Some("llm::knobs")
    );
    assert_eq!(unit(&["llm", "Knobs"]).as_deref(), Some("llm"));
    assert_eq!(unit(&["Shared"]).as_deref(), Some(ROOT));
}

#[test]
fn an_upward_import_and_a_circle_in_a_layer_are_reported_with_their_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lab = dir.path();
    let write = |name: &str, text: &str| {
        let path = lab.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    };
    write(
        "mod.rs",
        "mod config;\nmod a;\nmod b;\nmod top;\n#[cfg(test)]\nmod checks;\n",
    );
    write("config.rs", "use super::top::T;\n");
    write("a.rs", "use super::b::B;\nuse super::config::C;\n");
    write(
        "b.rs",
        "fn f() { super::a::g(); }\n#[cfg(test)]\nmod t { use super::top::X; }\n",
    );
    write("top.rs", "use super::{a, b, config};\n");
    write("checks.rs", "use super::top::Y;\n");
    let layers: &[&[&str]] = &[&["config"], &["a", "b"], &["top", ROOT]];
    let bad = violations(lab, layers);
    assert_eq!(
        bad,
        vec![
            "config.rs: `config` (layer 1) imports `top` (layer 3) by `super::top::T`".to_string(),
            "a.rs: `a` imports `b` by `super::b::B`, and `b` leads back to `a` (a circle in layer 2)"
                .to_string(),
            "b.rs: `b` imports `a` by `super::a::g`, and `a` leads back to `b` (a circle in layer 2)"
                .to_string(),
        ]
    );
    write("b.rs", "pub struct B;\n");
    assert_eq!(
        violations(lab, layers),
        vec![
            "config.rs: `config` (layer 1) imports `top` (layer 3) by `super::top::T`".to_string()
        ]
    );
    write("c.rs", "pub struct C;\n");
    assert_eq!(
        violations(lab, layers).first().map(String::as_str),
        Some("c.rs: in no unit of LAB_LAYERS")
    );
}
