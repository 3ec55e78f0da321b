//! Chains of handoffs. A session started by a handoff names the one it was handed off from
//! (its header's `parentSession`), so the sessions of a folder form chains: a tree under each
//! first session (`/back` then another handoff branches it). This module is the one owner of
//! walking them, on disk (a session's ancestors, the first session of its chain) and over a
//! listing (each chain's root and newest session, the picker's order). Every walk ends where
//! the links loop (files edited by hand), never hangs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::scan;
use super::{SessionError, SessionHeader, SessionInfo};

/// Links followed on disk at most: a chain is at most a few hundred handoffs long.
const MAX_LINKS: usize = 1024;

/// One session of a chain followed on disk.
#[derive(Debug)]
pub struct Link {
    pub path: PathBuf,
    /// Its header, or why it cannot be read (the walk ends there).
    pub header: Result<SessionHeader, SessionError>,
}

/// The session at `start` and its ancestors, nearest first, each read as far as its header:
/// `start`, the session it was handed off from, that one's, … The walk ends after a file whose
/// header cannot be read (that link is the last), at a file already met, or after
/// [`MAX_LINKS`].
pub fn ancestors(start: &Path) -> impl Iterator<Item = Link> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut next = Some(start.to_path_buf());
    std::iter::from_fn(move || {
        let path = next.take()?;
        if seen.len() >= MAX_LINKS || seen.contains(&path) {
            return None;
        }
        let header = scan::read_header(&path);
        next = header.as_ref().ok().and_then(|h| h.parent_session.as_deref()).map(PathBuf::from);
        seen.push(path.clone());
        Some(Link { path, header })
    })
}

/// The first session of the chain `file` belongs to: the farthest ancestor whose file is there.
pub fn root(file: &Path) -> PathBuf {
    ancestors(file)
        .take_while(|link| link.path == file || link.path.is_file())
        .last()
        .map_or_else(|| file.to_path_buf(), |link| link.path)
}

/// A chain of handoffs among listed sessions.
#[derive(Debug)]
pub struct Chain<'a> {
    /// Its first session.
    pub root: &'a SessionInfo,
    /// Its newest session (anywhere in its tree).
    pub newest: &'a SessionInfo,
    /// Its sessions, in the listing's order (newest first).
    pub members: Vec<&'a SessionInfo>,
}

/// A listed session with its place in its chain (the picker draws it so).
#[derive(Debug)]
pub struct Placed<'a> {
    pub session: &'a SessionInfo,
    /// 0 for a chain's first session, 1 for one handed off from it, …
    pub depth: usize,
}

/// The chains among the sessions of a listing (newest first, as `list_sessions` returns them).
/// A session whose parent is listed hangs under it; one whose parent is not (another folder, a
/// file gone) starts a chain; sessions whose links loop each start a chain of their own.
pub struct Chains<'a> {
    listed: &'a [SessionInfo],
    /// Each session's parent among `listed` (an index), when it hangs under one.
    parent: Vec<Option<usize>>,
    /// Each session's children, newest first.
    children: Vec<Vec<usize>>,
    /// The newest session (smallest index) of each session's subtree.
    newest: Vec<usize>,
}

impl<'a> Chains<'a> {
    pub fn of(listed: &'a [SessionInfo]) -> Self {
        let by_path: HashMap<&Path, usize> = listed.iter().enumerate().map(|(i, s)| (s.path.as_path(), i)).collect();
        let named: Vec<Option<usize>> = listed
            .iter()
            .enumerate()
            .map(|(i, s)| s.parent_session.as_deref().and_then(|p| by_path.get(Path::new(p)).copied()).filter(|&p| p != i))
            .collect();
        // A session on a loop of links hangs under nobody: following parents from it comes back.
        let on_loop = |i: usize| {
            let mut at = named[i];
            for _ in 0..listed.len() {
                match at {
                    Some(p) if p == i => return true,
                    Some(p) => at = named[p],
                    None => return false,
                }
            }
            false
        };
        let parent: Vec<Option<usize>> = (0..listed.len()).map(|i| if on_loop(i) { None } else { named[i] }).collect();
        let mut children = vec![Vec::new(); listed.len()];
        // In the listing's order: each session's children come newest first.
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = p {
                children[*p].push(i);
            }
        }
        let newest: Vec<usize> = (0..listed.len()).collect();
        let mut chains = Self { listed, parent, children, newest };
        chains.settle_newest();
        chains
    }

    /// The newest session of every subtree (a child can be listed before or after its parent:
    /// each tree is walked from its root).
    fn settle_newest(&mut self) {
        fn visit(i: usize, children: &[Vec<usize>], newest: &mut [usize]) -> usize {
            let mut best = i;
            for &c in &children[i] {
                best = best.min(visit(c, children, newest));
            }
            newest[i] = best;
            best
        }
        for i in 0..self.listed.len() {
            if self.parent[i].is_none() {
                visit(i, &self.children, &mut self.newest);
            }
        }
    }

    /// The first session of `i`'s chain (an index).
    fn root_index(&self, mut i: usize) -> usize {
        while let Some(p) = self.parent[i] {
            i = p;
        }
        i
    }

    /// Every chain, the one with the newest session first.
    pub fn chains(&self) -> Vec<Chain<'a>> {
        let mut by_root: Vec<(usize, Vec<&'a SessionInfo>)> = Vec::new();
        for (i, s) in self.listed.iter().enumerate() {
            let root = self.root_index(i);
            match by_root.iter_mut().find(|(r, _)| *r == root) {
                Some((_, members)) => members.push(s),
                None => by_root.push((root, vec![s])),
            }
        }
        by_root
            .into_iter()
            .map(|(root, members)| Chain { root: &self.listed[root], newest: &self.listed[self.newest[root]], members })
            .collect()
    }

    /// The chain that holds the session with `id`.
    pub fn chain_of(&self, id: &str) -> Option<Chain<'a>> {
        let at = self.listed.iter().position(|s| s.id == id)?;
        let root = &self.listed[self.root_index(at)];
        self.chains().into_iter().find(|c| std::ptr::eq(c.root, root))
    }

    /// The picker's order: each chain as a tree, its first session, then the sessions handed off
    /// from it, each under its parent; chains, and the children of one session, ordered by the
    /// newest session in them.
    pub fn placed(&self) -> Vec<Placed<'a>> {
        let mut roots: Vec<usize> = (0..self.listed.len()).filter(|&i| self.parent[i].is_none()).collect();
        roots.sort_by_key(|&r| self.newest[r]);
        let mut out = Vec::with_capacity(self.listed.len());
        let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|r| (r, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            out.push(Placed { session: &self.listed[i], depth });
            let mut kids = self.children[i].clone();
            kids.sort_by_key(|&c| std::cmp::Reverse(self.newest[c]));
            stack.extend(kids.into_iter().map(|c| (c, depth + 1)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, parent: Option<&str>) -> SessionInfo {
        SessionInfo::listed(id, parent, false)
    }

    fn ids(placed: &[Placed<'_>]) -> Vec<(String, usize)> {
        placed.iter().map(|p| (p.session.id.clone(), p.depth)).collect()
    }

    #[test]
    fn chains_put_children_under_parents_ordered_by_their_newest_session() {
        // Newest first. a ⇠ b ⇠ c; d alone; a ⇠ g (a branch: /back, then another handoff),
        // and g's child h is the newest of all.
        let listed = vec![info("h", Some("g")), info("c", Some("b")), info("d", None), info("g", Some("a")), info("b", Some("a")), info("a", None)];
        let chains = Chains::of(&listed);
        assert_eq!(
            ids(&chains.placed()),
            [("a", 0), ("g", 1), ("h", 2), ("b", 1), ("c", 2), ("d", 0)].map(|(i, d)| (i.to_string(), d))
        );
        let found: Vec<(&str, &str, usize)> =
            chains.chains().iter().map(|c| (c.root.id.as_str(), c.newest.id.as_str(), c.members.len())).collect();
        assert_eq!(found, [("a", "h", 5), ("d", "d", 1)]);
        // Any session of a chain finds its chain, whose newest is the newest of the whole tree.
        assert_eq!(chains.chain_of("b").unwrap().newest.id, "h");
        assert!(chains.chain_of("nobody").is_none());
    }

    #[test]
    fn a_loop_in_the_links_ends_and_lists_every_session() {
        let looped = vec![info("x", Some("y")), info("y", Some("x")), info("z", Some("x")), info("self", Some("self"))];
        let chains = Chains::of(&looped);
        assert_eq!(chains.placed().len(), 4);
        let roots: Vec<&str> = chains.chains().iter().map(|c| c.root.id.as_str()).collect();
        assert_eq!(roots, ["x", "y", "self"]);
        assert_eq!(chains.chain_of("z").unwrap().root.id, "x");
    }

    #[test]
    fn ancestors_on_disk_end_at_an_unreadable_file_or_a_loop() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, parent: Option<&str>| {
            let path = dir.path().join(format!("{name}.jsonl"));
            let parent = parent.map(|p| format!(r#","parentSession":"{}""#, dir.path().join(format!("{p}.jsonl")).display()));
            let header = format!(r#"{{"type":"session","version":3,"id":"{name}","timestamp":"t","cwd":"/w"{}}}"#, parent.unwrap_or_default());
            std::fs::write(&path, header + "\n").unwrap();
            path
        };
        file("a", None);
        file("b", Some("a"));
        let c = file("c", Some("b"));
        let walked: Vec<String> = ancestors(&c).map(|l| l.header.unwrap().id).collect();
        assert_eq!(walked, ["c", "b", "a"]);
        assert_eq!(root(&c), dir.path().join("a.jsonl"));
        // A parent gone: the walk names it and ends; the root is the farthest file there.
        let d = file("d", Some("gone"));
        let links: Vec<Link> = ancestors(&d).collect();
        assert_eq!(links.len(), 2);
        assert!(links[1].header.is_err());
        assert_eq!(root(&d), d);
        // A loop ends where it would repeat.
        let x = file("x", Some("y"));
        file("y", Some("x"));
        assert_eq!(ancestors(&x).count(), 2);
    }
}
