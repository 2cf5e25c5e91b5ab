use super::*;

fn empty() -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let model = Model::load(dir.path()).unwrap();
    (dir, model)
}

/// The file at `path` in `tree`, read whole; None if no such name.
fn read(tree: &Tree, path: &str) -> Option<Vec<u8>> {
    let mut at = ROOT;
    for part in path.split('/') {
        let Some(Node::Dir { entries, .. }) = tree.nodes.get(&at) else {
            return None;
        };
        at = *entries.get(OsStr::new(part))?;
    }
    match tree.nodes.get(&at) {
        Some(Node::File { data, .. }) => Some(data.read(0, data.size as usize)),
        // A durable name whose inode never got anything durable: an empty file.
        None => Some(Vec::new()),
        Some(Node::Dir { .. }) => None,
    }
}

#[test]
fn written_data_survives_a_cut_only_once_fsynced() {
    let (_d, mut m) = empty();
    let f = m.create(ROOT, OsStr::new("a"), false, 0o644, true).unwrap();
    m.sync_dir(ROOT);
    m.write(f, 0, b"hello").unwrap();
    assert_eq!(
        read(&m.after_cut(None), "a"),
        Some(Vec::new()),
        "unsynced data is lost, the synced name stays"
    );
    m.sync_file(f);
    m.write(f, 5, b" world").unwrap();
    assert_eq!(read(&m.after_cut(None), "a").unwrap(), b"hello");
    assert_eq!(
        read(&m.live, "a").unwrap(),
        b"hello world",
        "readers see everything written"
    );
}

#[test]
fn a_new_name_needs_its_directory_fsynced_and_the_files_fsync_is_not_enough() {
    let (_d, mut m) = empty();
    let f = m.create(ROOT, OsStr::new("a"), false, 0o644, true).unwrap();
    m.write(f, 0, b"x").unwrap();
    m.sync_file(f);
    assert_eq!(read(&m.after_cut(None), "a"), None);
    m.sync_dir(ROOT);
    assert_eq!(read(&m.after_cut(None), "a").unwrap(), b"x");
}

#[test]
fn a_rename_over_a_file_is_durable_only_with_its_directory() {
    let (_d, mut m) = empty();
    let old = m.create(ROOT, OsStr::new("state"), false, 0o644, true).unwrap();
    m.write(old, 0, b"old").unwrap();
    m.sync_file(old);
    m.sync_dir(ROOT);
    let tmp = m.create(ROOT, OsStr::new("state.tmp"), false, 0o644, true).unwrap();
    m.write(tmp, 0, b"new").unwrap();
    m.sync_file(tmp);
    m.rename(ROOT, OsStr::new("state.tmp"), ROOT, OsStr::new("state"), false)
        .unwrap();
    assert_eq!(read(&m.live, "state").unwrap(), b"new");
    assert_eq!(
        read(&m.after_cut(None), "state").unwrap(),
        b"old",
        "the rename is not durable yet"
    );
    assert_eq!(read(&m.after_cut(None), "state.tmp"), None);
    m.sync_dir(ROOT);
    let after = m.after_cut(None);
    assert_eq!(read(&after, "state").unwrap(), b"new");
    assert_eq!(read(&after, "state.tmp"), None);
}

#[test]
fn a_rename_between_directories_is_one_change_to_both() {
    let (_d, mut m) = empty();
    let x = m.create(ROOT, OsStr::new("x"), true, 0o755, false).unwrap();
    let y = m.create(ROOT, OsStr::new("y"), true, 0o755, false).unwrap();
    m.sync_dir(ROOT);
    let f = m.create(x, OsStr::new("a"), false, 0o644, true).unwrap();
    m.write(f, 0, b"v").unwrap();
    m.sync_file(f);
    m.rename(x, OsStr::new("a"), y, OsStr::new("b"), false).unwrap();
    // fsync of the destination alone brings the create in x it depends on, and the
    // removal from x with it: never two names, never none.
    m.sync_dir(y);
    let after = m.after_cut(None);
    assert_eq!(read(&after, "y/b").unwrap(), b"v");
    assert_eq!(read(&after, "x/a"), None);
}

#[test]
fn a_directorys_fsync_does_not_make_its_own_name_durable() {
    let (_d, mut m) = empty();
    let x = m.create(ROOT, OsStr::new("x"), true, 0o755, false).unwrap();
    let f = m.create(x, OsStr::new("a"), false, 0o644, true).unwrap();
    m.sync_file(f);
    m.sync_dir(x);
    assert_eq!(
        read(&m.after_cut(None), "x/a"),
        None,
        "x itself is not durable in the root"
    );
    m.sync_dir(ROOT);
    assert_eq!(read(&m.after_cut(None), "x/a"), Some(Vec::new()));
}

#[test]
fn an_unlink_is_undone_by_a_cut_before_the_directory_fsync() {
    let (_d, mut m) = empty();
    let f = m.create(ROOT, OsStr::new("a"), false, 0o644, false).unwrap();
    m.write(f, 0, b"keep").unwrap();
    m.sync_file(f);
    m.sync_dir(ROOT);
    m.remove(ROOT, OsStr::new("a"), false).unwrap();
    assert!(m.node(f).is_none(), "closed and unlinked: gone from the live tree");
    assert_eq!(read(&m.after_cut(None), "a").unwrap(), b"keep");
    m.sync_dir(ROOT);
    assert_eq!(read(&m.after_cut(None), "a"), None);
}

#[test]
fn a_failed_write_back_never_reaches_the_disk_but_stays_readable() {
    let (_d, mut m) = empty();
    let f = m.create(ROOT, OsStr::new("a"), false, 0o644, true).unwrap();
    m.sync_dir(ROOT);
    m.write(f, 0, b"lost").unwrap();
    m.lose_pending_data(f);
    m.sync_file(f);
    assert_eq!(read(&m.live, "a").unwrap(), b"lost");
    assert_eq!(read(&m.after_cut(None), "a").unwrap(), b"");
}

#[test]
fn a_truncated_page_reads_zeros_when_the_file_grows_again() {
    let mut data = FileData::default();
    data.write(0, &[7u8; 6000]);
    data.truncate(10);
    data.write(5000, b"z");
    let back = data.read(0, 5001);
    assert_eq!(&back[..10], &[7u8; 10]);
    assert!(back[10..5000].iter().all(|&b| b == 0));
    assert_eq!(back[5000], b'z');
}

#[test]
fn a_cut_keeping_a_prefix_is_deterministic_from_its_seed_and_keeps_only_prefixes() {
    let (_d, mut m) = empty();
    let f = m.create(ROOT, OsStr::new("log"), false, 0o644, true).unwrap();
    m.sync_dir(ROOT);
    for i in 0..8u8 {
        m.write(f, u64::from(i) * PAGE as u64, &[i + 1; PAGE]).unwrap();
    }
    for i in 0..6 {
        m.create(ROOT, OsStr::new(&format!("e{i}")), false, 0o644, false)
            .unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    for seed in 0..40 {
        let a = m.after_cut(Some(&mut Rng::new(seed)));
        let b = m.after_cut(Some(&mut Rng::new(seed)));
        assert!(a == b, "seed {seed} cut twice gave two trees");
        let log = read(&a, "log").unwrap();
        let pages = log.len() / PAGE;
        for (i, page) in log.chunks(PAGE).enumerate() {
            assert!(
                page.iter().all(|&x| x == i as u8 + 1),
                "page {i} of a prefix of {pages}"
            );
        }
        let names: Vec<bool> = (0..6).map(|i| read(&a, &format!("e{i}")).is_some()).collect();
        let kept = names.iter().take_while(|&&x| x).count();
        assert!(
            names[kept..].iter().all(|&x| !x),
            "entries kept are a prefix: {names:?}"
        );
        seen.insert((pages, kept));
    }
    assert!(seen.len() > 5, "different seeds keep different prefixes: {seen:?}");
}

#[test]
fn a_stored_tree_loads_back_the_same() {
    let (_d, mut m) = empty();
    let x = m.create(ROOT, OsStr::new("x"), true, 0o750, false).unwrap();
    let f = m.create(x, OsStr::new("a"), false, 0o600, true).unwrap();
    m.write(f, 3 * PAGE as u64 + 7, b"tail").unwrap();
    m.link(f, ROOT, OsStr::new("b")).unwrap();
    m.sync_file(f);
    m.sync_dir(x);
    m.sync_dir(ROOT);
    let out = tempfile::tempdir().unwrap();
    m.after_cut(None).store(out.path()).unwrap();
    let back = Model::load(out.path()).unwrap();
    assert_eq!(read(&back.live, "x/a"), read(&m.live, "x/a"));
    assert_eq!(read(&back.live, "b"), read(&m.live, "x/a"));
    let meta = fs::metadata(out.path().join("x/a")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 3 * PAGE as u64 + 11);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.nlink(), 2, "two names, one inode");
}
