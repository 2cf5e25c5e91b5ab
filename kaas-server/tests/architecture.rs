//! The module map of kaas-server, kaas-core and kaasctl, and the rule that keeps it true
//! (docs/architecture.md draws it).
//!
//! Every module sits in a layer; a module may use modules of its own layer or below,
//! never above. And no two modules use each other, directly or round a longer
//! circle: among the modules of one folder (siblings), the "uses" edges form no
//! cycle. A module's use of its own parent or children does not count (a folder's
//! `mod.rs` and its files are one unit to the outside).
//!
//! "Uses" is read from the source with `syn`: every `crate::…`, `super::…` and
//! `self::…` path, in `use` items, in code, in macro arguments and in attribute
//! arguments (`#[arg(value_parser = crate::…)]`). Test code (`#[cfg(test)]` items,
//! `tests.rs` files) is left out: a test may reach anywhere.
//!
//! What it cannot see: a method call names no module, so files that each hold an
//! `impl` block of one type (`cluster/*.rs`, `txn_coordinator/*.rs`) may call each
//! other's methods unseen; and a name used through an item re-exported at the crate
//! root (`crate::X`) counts as a use of the root, which is everyone's parent.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::{self, Visit};

/// kaas-server's layers, lowest first.
const SERVER_LAYERS: &[(&str, &[&str])] = &[
    // Process-wide plumbing every layer may use: the parsed flags and listener
    // specifications, the allocation guard, the blocking-pool helper, the metric
    // registry.
    ("plumbing", &["alloc", "blocking", "config", "listeners", "metrics"]),
    // The broker's state: the topic registry and its partitions, the ACL cache, the
    // client quotas and their rates.
    ("state", &["registry", "authz", "quotas"]),
    // The cluster as this broker takes part in it (membership, ownership, the volume
    // sync, fences and markers, configs) and the two coordinators.
    ("cluster", &["cluster", "groups", "txn_coordinator"]),
    // `Broker`, their composition.
    ("broker", &["broker"]),
    // One file per Kafka API.
    ("handlers", &["handlers"]),
    // Connections: sockets, TLS, SASL, the operations HTTP listener.
    ("connections", &["server", "tls", "sasl", "http", "peers"]),
    // Wires everything together and runs it.
    ("runtime", &["runtime"]),
];

/// kaas-core's layers, lowest first.
const CORE_LAYERS: &[(&str, &[&str])] = &[
    // The volume: paths, safe file I/O, typed errors, crash points.
    ("files", &["error", "fsutil", "failpoint", "layout"]),
    // Wire and file formats with no state: record batches, ACLs, SCRAM, client quotas.
    ("formats", &["batch", "acl", "scram", "quotas", "consumer_group"]),
    // A partition's segments, indexes, `.txnindex` files and the cleaner's swap.
    ("log", &["log"]),
    // The state machines and the small files they live in.
    (
        "state machines",
        &[
            "configs",
            "idempotence",
            "txn",
            "broker",
            "ownership",
            "producer_ids",
            "fence_log",
            "marker_queue",
            "topic",
            "offsets",
        ],
    ),
    // The transaction slot store and the log cleaner.
    ("stores", &["cleaner", "txn_store"]),
    // A partition: log + producer state + aborted transactions; reconciling it.
    ("partition", &["partition", "reconcile"]),
    // Read-only views and direct writes for kaasctl.
    ("tools", &["inspect", "admin"]),
];

/// kaasctl's layers, lowest first.
const KAASCTL_LAYERS: &[(&str, &[&str])] = &[
    // Output (tables, JSON), the flags, the volume as kaasctl opens it.
    ("plumbing", &["out", "cli", "cluster"]),
    // One file (or folder) per command, returning data.
    ("commands", &["cmd"]),
    // The dashboard, which shows what the commands gather.
    ("dashboard", &["top"]),
];

#[test]
fn modules_use_only_their_own_layer_or_below_and_no_two_use_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = BTreeSet::new();
    found.extend(check("kaas-server", &root.join("src"), SERVER_LAYERS));
    found.extend(check("kaas-core", &root.join("../kaas-core/src"), CORE_LAYERS));
    found.extend(check("kaasctl", &root.join("../kaasctl/src"), KAASCTL_LAYERS));
    let broken: Vec<String> = found
        .iter()
        .map(|(krate, edge, why)| format!("{krate}: {edge}: {why}"))
        .collect();
    assert!(
        broken.is_empty(),
        "modules break the module map (kaas-server/tests/architecture.rs, docs/architecture.md):\n{}",
        broken.join("\n")
    );
}

type Module = Vec<String>;

/// The rule's violations in one crate: (crate, "a -> b", why).
fn check(krate: &str, src: &Path, layers: &[(&str, &[&str])]) -> Vec<(String, String, String)> {
    let uses = crate_uses(src);
    let modules: BTreeSet<Module> = uses.keys().cloned().collect();
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, (_, names))| names.iter().map(move |n| (*n, i)))
        .collect();
    let mut out = Vec::new();
    for m in modules.iter().filter(|m| !m.is_empty()) {
        if !layer_of.contains_key(m[0].as_str()) {
            out.push((
                krate.to_string(),
                m[0].clone(),
                "has no layer: add it to the map".to_string(),
            ));
        }
    }
    // Sibling edges: (parent, from child, to child) -> an example of the use.
    let mut edges: BTreeMap<(Module, String, String), String> = BTreeMap::new();
    for (from, refs) in &uses {
        for (path, file) in refs {
            let Some(to) = target(&modules, path) else { continue };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // itself, an ancestor or a descendant
            }
            let (a, b) = (&from[common], &to[common]);
            let example = format!("{} uses {}", file.display(), path.join("::"));
            if common == 0 {
                if let (Some(la), Some(lb)) = (layer_of.get(a.as_str()), layer_of.get(b.as_str())) {
                    if lb > la {
                        out.push((
                            krate.to_string(),
                            format!("{a} -> {b}"),
                            format!(
                                "layer {} uses layer {} above it ({example})",
                                layers[*la].0, layers[*lb].0
                            ),
                        ));
                    }
                }
            }
            edges
                .entry((from[..common].to_vec(), a.clone(), b.clone()))
                .or_insert(example);
        }
    }
    for (parent, a, b) in in_circles(&edges) {
        let prefix = if parent.is_empty() {
            String::new()
        } else {
            format!("{}::", parent.join("::"))
        };
        let example = &edges[&(parent.clone(), a.clone(), b.clone())];
        out.push((
            krate.to_string(),
            format!("{prefix}{a} -> {prefix}{b}"),
            format!("part of a circle: {b} leads back to {a} ({example})"),
        ));
    }
    out
}

/// The longest prefix of `path` that is a module.
fn target(modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// The sibling edges (parent, a, b) that lie on a circle: those where `b` leads back
/// to `a` through siblings of the same parent.
fn in_circles(edges: &BTreeMap<(Module, String, String), String>) -> Vec<(Module, String, String)> {
    let next = |parent: &Module, n: &String| -> Vec<String> {
        edges
            .keys()
            .filter(|(p, a, _)| p == parent && a == n)
            .map(|(_, _, b)| b.clone())
            .collect()
    };
    edges
        .keys()
        .filter(|(parent, a, b)| {
            let mut seen = BTreeSet::from([b.clone()]);
            let mut todo = vec![b.clone()];
            while let Some(n) = todo.pop() {
                for m in next(parent, &n) {
                    if seen.insert(m.clone()) {
                        todo.push(m);
                    }
                }
            }
            seen.contains(a)
        })
        .cloned()
        .collect()
}

/// Every module of the crate under `src` with the paths it uses (absolute, from the
/// crate root) and the file each use is in.
fn crate_uses(src: &Path) -> BTreeMap<Module, Vec<(Module, PathBuf)>> {
    let mut files = Vec::new();
    collect_files(src, &mut files);
    files.sort();
    let mut test_modules: BTreeSet<Module> = BTreeSet::new();
    let mut parsed = Vec::new();
    for file in files {
        let module = module_of(src, &file);
        let text = std::fs::read_to_string(&file).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for item in &ast.items {
            if let syn::Item::Mod(m) = item {
                if m.content.is_none() && is_test(&m.attrs) {
                    let mut t = module.clone();
                    t.push(m.ident.to_string());
                    test_modules.insert(t);
                }
            }
        }
        parsed.push((module, file, ast));
    }
    let mut out: BTreeMap<Module, Vec<(Module, PathBuf)>> = BTreeMap::new();
    for (module, file, ast) in parsed {
        if test_modules.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        let mut v = Uses {
            module: module.clone(),
            file: file.clone(),
            out: &mut out,
        };
        v.out.entry(module).or_default();
        v.visit_file(&ast);
    }
    out
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

struct Uses<'a> {
    module: Module,
    file: PathBuf,
    out: &'a mut BTreeMap<Module, Vec<(Module, PathBuf)>>,
}

impl Uses<'_> {
    /// Records a path given as its segments, if it starts at the crate, `self` or `super`.
    fn record(&mut self, segments: &[String]) {
        let mut abs = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") => self.module.clone(),
            Some("super") => {
                let mut m = self.module.clone();
                m.pop();
                m
            }
            _ => return,
        };
        let mut rest = &segments[1..];
        while rest.first().map(String::as_str) == Some("super") {
            abs.pop();
            rest = &rest[1..];
        }
        abs.extend(rest.iter().filter(|s| *s != "*").cloned());
        self.out
            .entry(self.module.clone())
            .or_default()
            .push((abs, self.file.clone()));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.record(&full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.record(&full);
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `crate::a::b` (or `super::…`) sequences inside a macro's arguments.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            if let TokenTree::Group(g) = &flat[i] {
                self.tokens(g.stream());
                i += 1;
                continue;
            }
            let starts = matches!(&flat[i], TokenTree::Ident(id) if id == "crate" || id == "super" || id == "self");
            if !starts {
                i += 1;
                continue;
            }
            let mut segments = vec![flat[i].to_string()];
            let mut j = i + 1;
            while j + 2 < flat.len() + 1 {
                let colons = matches!((&flat.get(j), &flat.get(j + 1)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
                match (colons, flat.get(j + 2)) {
                    (true, Some(TokenTree::Ident(id))) => {
                        segments.push(id.to_string());
                        j += 3;
                    }
                    _ => break,
                }
            }
            if segments.len() > 1 {
                self.record(&segments);
            }
            i = j;
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_test(attrs) {
            return;
        }
        if let syn::Item::Mod(m) = item {
            if let Some((_, items)) = &m.content {
                self.module.push(m.ident.to_string());
                for i in items {
                    self.visit_item(i);
                }
                self.module.pop();
            }
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if let syn::ImplItem::Fn(f) = item {
            if is_test(&f.attrs) {
                return;
            }
        }
        visit::visit_impl_item(self, item);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &attr.meta {
            self.tokens(list.tokens.clone());
        }
        visit::visit_attribute(self, attr);
    }
}
