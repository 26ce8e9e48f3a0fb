//! The audit's shape, checked: no import circle among the files of `src/audit/`, and a rule
//! file (`rules/<name>.rs`) imports nothing of another rule (nor the registry): rules reach each
//! other only through facts in the ledger.
//!
//! Why a test: the audit once was one type spread over eleven files that all imported each
//! other, so no judgement could be read in one place. A circle comes back one `use` at a time,
//! and a reviewer does not see it in a diff.
//!
//! The reader is lexical, like `crate::layers`'s (comments, strings and `#[cfg(test)]` items
//! removed): every `super::…`, `self::…`, `crate::audit::…` path and, in a `mod.rs`, every path
//! that starts with a child module's name, resolved to the file it names (a path to an item of
//! a `mod.rs`, such as a re-export, names that `mod.rs`). Test-only files (`#[cfg(test)] mod
//! x;`) are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module of the audit: its path below `audit` (`[]` is `audit/mod.rs`).
type Module = Vec<String>;

/// The name a report uses for `m`.
fn show(m: &Module) -> String {
    if m.is_empty() {
        "mod".to_string()
    } else {
        m.join("/")
    }
}

/// The modules that `rest` (the text right after a path prefix that resolved to `base`) names:
/// the longest known module of each path, or `base` itself for an item of `base`.
fn targets(base: &Module, rest: &str, known: &BTreeSet<Module>, out: &mut BTreeSet<Module>) {
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0usize;
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    targets(base, group[start..i].trim(), known, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    targets(base, group[start..i].trim(), known, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let mut next = base.clone();
    next.push(name.clone());
    if !name.is_empty() && known.contains(&next) {
        match rest[name.len()..].strip_prefix("::") {
            Some(tail) => targets(&next, tail, known, out),
            None => {
                out.insert(next);
            }
        }
    } else {
        out.insert(base.clone());
    }
}

/// The audit modules that module `m` (its non-test code `code`) imports.
fn imports(m: &Module, code: &str, known: &BTreeSet<Module>, is_mod_rs: bool) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || (!ident(b[i - 1]) && b[i - 1] != b':');
        if !starts_word {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        // Where the path starts resolving: `crate::audit::`, `super::`…, `self::`, or (in a
        // mod.rs) a child's name.
        let resolved: Option<(Module, &str)> =
            if let Some(tail) = rest.strip_prefix("crate::audit::") {
                Some((Vec::new(), tail))
            } else if rest.starts_with("super::") {
                let mut base = m.clone();
                let mut tail = rest;
                while let Some(t) = tail.strip_prefix("super::") {
                    base.pop();
                    tail = t;
                }
                Some((base, tail))
            } else if let Some(tail) = rest.strip_prefix("self::") {
                Some((m.clone(), tail))
            } else if is_mod_rs {
                let name: String = rest.chars().take_while(|c| ident(*c as u8)).collect();
                let mut child = m.clone();
                child.push(name.clone());
                (!name.is_empty() && rest[name.len()..].starts_with("::") && known.contains(&child))
                    .then_some((m.clone(), rest))
            } else {
                None
            };
        if let Some((base, tail)) = resolved {
            targets(&base, tail, known, &mut out);
        }
        i += 1;
    }
    out.remove(m);
    out
}

/// Module → the audit modules it imports.
fn graph(files: &[(Module, bool, String)]) -> BTreeMap<Module, BTreeSet<Module>> {
    let known: BTreeSet<Module> = files.iter().map(|(m, _, _)| m.clone()).collect();
    files
        .iter()
        .map(|(m, is_mod, code)| (m.clone(), imports(m, code, &known, *is_mod)))
        .collect()
}

/// What breaks the audit's shape in `files` (module, is a `mod.rs`, non-test code): rule files
/// importing another rule or the registry, and import circles (each named once, by its files).
fn problems(files: &[(Module, bool, String)]) -> Vec<String> {
    let graph = graph(files);
    let mut bad = Vec::new();
    let is_rule = |m: &Module| m.len() == 2 && m[0] == "rules";
    for (m, to) in &graph {
        if !is_rule(m) {
            continue;
        }
        for t in to
            .iter()
            .filter(|t| t.first().map(String::as_str) == Some("rules"))
        {
            bad.push(format!(
                "rule {} imports {} (rules meet only in the ledger)",
                show(m),
                show(t)
            ));
        }
    }
    // A circle: a path from a module back to itself (depth-first search, each circle reported
    // from its smallest module).
    for start in graph.keys() {
        let mut stack: Vec<(Module, Vec<Module>)> = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == start {
                    let smallest = path.iter().min().is_some_and(|m| m == start);
                    if smallest {
                        let names: Vec<String> = path.iter().chain([start]).map(show).collect();
                        bad.push(format!("import circle: {}", names.join(" -> ")));
                    }
                } else if next > start && seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// The audit's source files: (module, is a `mod.rs`, non-test code).
fn read_audit(dir: &Path) -> Vec<(Module, bool, String)> {
    fn walk(dir: &Path, m: &Module, out: &mut Vec<(Module, bool, String)>) {
        let src = std::fs::read_to_string(dir.join("mod.rs")).expect("read mod.rs");
        let test_only: Vec<String> = src
            .lines()
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0].trim() == "#[cfg(test)]")
            .filter_map(|w| w[1].trim().strip_prefix("mod ")?.strip_suffix(';'))
            .map(str::to_string)
            .collect();
        out.push((m.clone(), true, crate::layers::strip(&src)));
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read audit dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let mut child = m.clone();
            child.push(name.to_string());
            if path.is_dir() && path.join("mod.rs").exists() {
                walk(&path, &child, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && name != "mod"
                && !test_only.iter().any(|t| t == name)
            {
                let code = std::fs::read_to_string(&path).expect("read source");
                out.push((child, false, crate::layers::strip(&code)));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &Vec::new(), &mut out);
    out
}

fn module(path: &str) -> Module {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_audit_has_no_import_circle_and_no_rule_imports_another() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/audit");
    let files = read_audit(&dir);
    let g = graph(&files);
    let edge = |a: &str, b: &str| g.get(&module(a)).is_some_and(|t| t.contains(&module(b)));
    assert!(
        edge("engine", "ledger") && edge("rules", "rules/reissue") && edge("", "engine"),
        "the reader sees the real imports: {g:?}"
    );
    assert!(
        edge("rules/reissue", "ledger") && !edge("ledger", "engine"),
        "{g:?}"
    );
    let bad = problems(&files);
    assert!(
        bad.is_empty(),
        "the audit's shape is broken:\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn a_planted_rule_to_rule_import_and_a_planted_circle_are_reported() {
    let file = |m: &str, is_mod: bool, code: &str| (module(m), is_mod, crate::layers::strip(code));
    let good = vec![
        file(
            "",
            true,
            "pub mod ledger;\npub mod rules;\nuse ledger::Ledger;\n",
        ),
        file("ledger", false, "use super::finding::Finding;\n"),
        file("finding", false, "pub struct Finding;\n"),
        file(
            "rules",
            true,
            "mod a;\nmod b;\nuse crate::audit::ledger::Ledger;\nfn f() { a::A; b::B; }\n",
        ),
        file(
            "rules/a",
            false,
            "use crate::audit::ledger::Ledger;\nuse super::super::finding::{Finding, self};\n",
        ),
        file(
            "rules/b",
            false,
            "use crate::audit::{finding::Finding, ledger::Ledger};\n#[cfg(test)]\nmod t { use super::super::a::A; }\n",
        ),
    ];
    assert_eq!(problems(&good), Vec::<String>::new());
    let mut bad = good.clone();
    bad[5] = file(
        "rules/b",
        false,
        "use crate::audit::{ledger::Ledger, rules::a::A};\n",
    );
    bad.push(file(
        "rules/c",
        false,
        "use super::a::A; // a comment: super::b\n",
    ));
    bad.push(file(
        "rules/d",
        false,
        "fn f() { super::Rules::default(); }\n",
    ));
    bad[1] = file(
        "ledger",
        false,
        "use super::finding::Finding;\nuse super::Auditor;\n",
    );
    assert_eq!(
        problems(&bad),
        vec![
            "import circle: mod -> ledger -> mod".to_string(),
            "rule rules/b imports rules/a (rules meet only in the ledger)".to_string(),
            "rule rules/c imports rules/a (rules meet only in the ledger)".to_string(),
            "rule rules/d imports rules (rules meet only in the ledger)".to_string(),
        ]
    );
}
