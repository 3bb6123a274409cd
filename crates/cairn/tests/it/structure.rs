//! The engine's module graph, read from its source: no file imports one that imports it back, directly or through
//! others (a module and its own parent or children aside, which `mod` and re-exports tie both ways), as
//! ARCHITECTURE.md's invariant "imports run one way" says. A circle is where a change to one file drags the others
//! along; this keeps one from growing back unseen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `crates/cairn/src` by path (`crate::ops::push`), with its source, its unit tests left out.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, into: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let source = std::fs::read_to_string(&path).unwrap();
                let source = match source.find("#[cfg(test)]\nmod tests") {
                    Some(tests) => source[..tests].to_owned(),
                    None => source,
                };
                into.insert(module_path(&path), source);
            }
        }
    }
    let mut modules = BTreeMap::new();
    walk(&src(), &mut modules);
    modules
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `src/ops/push.rs` is `crate::ops::push`; `src/ops/mod.rs` is `crate::ops`; `src/lib.rs` is `crate`.
fn module_path(file: &Path) -> String {
    let relative = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    std::iter::once("crate".to_owned())
        .chain(parts)
        .collect::<Vec<_>>()
        .join("::")
}

/// The paths `source` names from `prefix` on (`crate::ops::push::Push` after `crate::`): each a run of `::`-joined
/// lowercase segments, the item's own name (capitalized, a macro's) left off.
fn paths_after<'a>(source: &'a str, prefix: &'a str) -> impl Iterator<Item = Vec<&'a str>> + 'a {
    source.match_indices(prefix).filter_map(move |(at, _)| {
        let before = source[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let mut segments = Vec::new();
        let mut rest = &source[at + prefix.len()..];
        loop {
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            segments.push(&rest[..end]);
            match rest[end..].strip_prefix("::") {
                Some(next) => rest = next,
                None => break,
            }
        }
        (!segments.is_empty()).then_some(segments)
    })
}

/// Which modules each module imports: every `crate::…` and `super::…` path it names, taken to the longest module it
/// reaches; a module and its ancestors or descendants are not counted.
fn imports(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, source) in modules {
        let parent = module
            .rsplit_once("::")
            .map_or("crate", |(p, _)| p)
            .to_owned();
        let named = paths_after(source, "crate::")
            .map(|segments| format!("crate::{}", segments.join("::")))
            .chain(
                paths_after(source, "super::")
                    .map(|segments| format!("{parent}::{}", segments.join("::"))),
            );
        for path in named {
            let mut candidate = path.as_str();
            let reached = loop {
                if modules.contains_key(candidate) {
                    break Some(candidate.to_owned());
                }
                match candidate.rsplit_once("::") {
                    Some((shorter, _)) => candidate = shorter,
                    None => break None,
                }
            };
            let Some(reached) = reached else { continue };
            let related = reached == *module
                || reached == "crate"
                || reached.starts_with(&format!("{module}::"))
                || module.starts_with(&format!("{reached}::"));
            if !related {
                edges.entry(module.clone()).or_default().insert(reached);
            }
        }
    }
    edges
}

/// The circles of the graph: its strongly connected components of more than one module.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.edges.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

#[test]
fn no_file_of_the_engine_imports_one_that_imports_it_back() {
    let modules = modules();
    assert!(
        modules.len() > 50,
        "the source was read: {} modules",
        modules.len()
    );
    let edges = imports(&modules);
    let circles = circles(&edges);
    let described: Vec<String> = circles
        .iter()
        .map(|circle| {
            let members: BTreeSet<&str> = circle.iter().map(String::as_str).collect();
            let links: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|to| members.contains(to.as_str()))
                        .map(move |to| format!("{from} -> {to}"))
                })
                .collect();
            links.join(", ")
        })
        .collect();
    assert!(
        circles.is_empty(),
        "modules that import each other, directly or through others:\n{}",
        described.join("\n")
    );
}

#[test]
fn the_graph_reader_finds_a_circle_through_three_modules() {
    let modules: BTreeMap<String, String> = [
        ("crate::a", "use crate::b::Thing;"),
        ("crate::b", "fn f() { crate::c::go(); }"),
        ("crate::c", "use super::a::{self, X};"),
        ("crate::d", "use crate::a::Y; use crate::d::inner::Z;"),
        ("crate::d::inner", "use super::Parent;"),
    ]
    .into_iter()
    .map(|(m, s)| (m.to_owned(), s.to_owned()))
    .collect();
    let circles = circles(&imports(&modules));
    assert_eq!(circles, [vec!["crate::a", "crate::b", "crate::c"]]);
}

/// The functions of `file` longer than `most` lines (from `fn` to its closing brace), with their lengths.
fn long_functions(file: &Path, most: usize) -> Vec<(String, usize)> {
    let source = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = source.lines().collect();
    let mut long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = line.len() - code.len();
        let Some(after_fn) = code
            .strip_prefix("pub(crate) ")
            .or_else(|| code.strip_prefix("pub "))
            .unwrap_or(code)
            .strip_prefix("fn ")
        else {
            continue;
        };
        let name: String = after_fn
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // Its end: the first line after it that closes a brace at its indent.
        let closing = format!("{}}}", " ".repeat(indent));
        if let Some(end) = lines[start + 1..]
            .iter()
            .position(|l| l.trim_end() == closing)
        {
            let length = end + 2;
            if length > most {
                long.push((name, length));
            }
        }
    }
    long
}

#[test]
fn no_function_of_the_claims_is_over_80_lines() {
    let dir = src().join("ops/claim");
    let mut long = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        for (name, length) in long_functions(&path, 80) {
            long.push(format!("{}: {name}, {length} lines", path.display()));
        }
    }
    assert!(
        long.is_empty(),
        "claim functions over 80 lines:\n{}",
        long.join("\n")
    );
}

/// The backend seam stays visible (issue 39): outside `store/`, the engine asks a transaction what its database can
/// do (`capabilities()`) or has its dialect run a statement whose shape differs (`dialect()`), rather than asking
/// which database it is. The few `is_postgres()` left ask which database for a reason of their own (a text built at
/// run time in its spelling, a public call for one database's own types), and each says why in a comment just above
/// it.
#[test]
fn outside_the_store_few_places_ask_which_database_and_each_says_why() {
    let mut asks = Vec::new();
    let mut unexplained = Vec::new();
    for (module, source) in modules() {
        if module == "crate::store" || module.starts_with("crate::store::") {
            continue;
        }
        let lines: Vec<&str> = source.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            if !line.contains("is_postgres()") || line.contains("fn is_postgres") {
                continue;
            }
            asks.push(format!("{module}:{}", at + 1));
            let explained = lines[at.saturating_sub(3)..at]
                .iter()
                .any(|l| l.trim_start().starts_with("//"));
            if !explained {
                unexplained.push(format!("{module}:{}", at + 1));
            }
        }
    }
    assert!(
        asks.len() <= 5,
        "is_postgres() outside store/ ({}), at most 5:\n{}",
        asks.len(),
        asks.join("\n")
    );
    assert!(
        unexplained.is_empty(),
        "is_postgres() outside store/ without a comment above saying why:\n{}",
        unexplained.join("\n")
    );
}

/// The maps stay maps: ARCHITECTURE.md at most 2,500 words, BENCHMARKS.md at most 3,500 (as `wc -w` counts).
#[test]
fn the_architecture_and_benchmarks_pages_stay_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (page, most) in [("ARCHITECTURE.md", 2_500), ("BENCHMARKS.md", 3_500)] {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let words = text.split_whitespace().count();
        assert!(
            words <= most,
            "{page} has {words} words, over {most}: it is a map, not a log"
        );
    }
}
