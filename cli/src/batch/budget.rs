//! One connection budget for every object of a batch.
//!
//! Each host has one ceiling (`--per-host`) and the batch one total (`--max-connections`),
//! whatever the number of objects running. An object starts with a [`Grant`]: a per-source
//! ceiling and a total ceiling that become its engine's `Config::per_host` and
//! `Config::total`, reserved from the budget until the object ends. A grant is at most the
//! host's fair share (its ceiling divided among the objects that may run on it at once) and
//! at most what the running objects left free; so the grants of the objects running on a
//! host never sum past its ceiling, and no object's engine opens more than its grant.

use std::collections::BTreeMap;

/// The ceilings and what the running objects hold.
#[derive(Debug)]
pub struct Budget {
    per_host: usize,
    total: usize,
    held: BTreeMap<String, usize>,
    held_total: usize,
}

/// What an object asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Per host, how many of the object's sources are on it.
    pub hosts: BTreeMap<String, usize>,
    /// Per host, the objects that may run on it at once, this one included (at least 1).
    pub sharing: BTreeMap<String, usize>,
    /// The objects that may run at once, this one included (at least 1).
    pub sharing_total: usize,
}

/// What an object was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Ceiling on connections per source (the engine's `per_host`).
    pub per_source: usize,
    /// Ceiling on connections over all the object's sources (the engine's `total`).
    pub total: usize,
    /// Per host, the connections reserved: `per_source` times the sources on it.
    pub hosts: BTreeMap<String, usize>,
}

impl Budget {
    /// A budget of `per_host` connections per host and `total` in all (each at least 1).
    pub fn new(per_host: usize, total: usize) -> Budget {
        Budget {
            per_host: per_host.max(1),
            total: total.max(1),
            held: BTreeMap::new(),
            held_total: 0,
        }
    }

    /// The per-host ceiling.
    pub fn per_host(&self) -> usize {
        self.per_host
    }

    /// The total ceiling.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Connections the running objects hold on `host`.
    pub fn held(&self, host: &str) -> usize {
        self.held.get(host).copied().unwrap_or(0)
    }

    /// Whether no object holds anything.
    pub fn idle(&self) -> bool {
        self.held_total == 0
    }

    /// Grants `claim` its share if every host it uses has room for one connection per source
    /// there, and reserves it; `None` (nothing reserved) otherwise. An idle budget always
    /// grants, one connection per source at least, so that an object with more mirrors on a
    /// host than its ceiling still runs (alone).
    pub fn grant(&mut self, claim: &Claim) -> Option<Grant> {
        let mut per_source = usize::MAX;
        for (host, &n) in &claim.hosts {
            let n = n.max(1);
            let share =
                (self.per_host / claim.sharing.get(host).copied().unwrap_or(1).max(1)).max(1);
            let free = self.per_host.saturating_sub(self.held(host)) / n;
            per_source = per_source.min(share.min(free));
        }
        let sources: usize = claim.hosts.values().map(|&n| n.max(1)).sum();
        let share_total = (self.total / claim.sharing_total.max(1)).max(1);
        let free_total = self.total.saturating_sub(self.held_total);
        let mut total = share_total.min(free_total);
        if self.idle() {
            per_source = per_source.max(1);
            total = total.max(1);
        }
        if per_source == 0 || per_source == usize::MAX || total == 0 {
            return None;
        }
        let total = total.min(per_source.saturating_mul(sources));
        let hosts: BTreeMap<String, usize> = claim
            .hosts
            .iter()
            .map(|(h, &n)| (h.clone(), per_source * n.max(1)))
            .collect();
        for (h, &c) in &hosts {
            *self.held.entry(h.clone()).or_default() += c;
        }
        self.held_total += total;
        Some(Grant {
            per_source,
            total,
            hosts,
        })
    }

    /// Returns what `grant` reserved.
    pub fn release(&mut self, grant: &Grant) {
        for (h, &c) in &grant.hosts {
            if let Some(held) = self.held.get_mut(h) {
                *held = held.saturating_sub(c);
                if *held == 0 {
                    self.held.remove(h);
                }
            }
        }
        self.held_total = self.held_total.saturating_sub(grant.total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn claim(hosts: &[(&str, usize)], sharing: usize) -> Claim {
        Claim {
            hosts: hosts.iter().map(|&(h, n)| (h.to_owned(), n)).collect(),
            sharing: hosts
                .iter()
                .map(|&(h, _)| (h.to_owned(), sharing))
                .collect(),
            sharing_total: sharing,
        }
    }

    #[test]
    fn objects_sharing_a_host_split_its_ceiling_and_the_next_waits_for_room() {
        let mut b = Budget::new(4, 16);
        let a = b.grant(&claim(&[("h", 1)], 2)).unwrap();
        let c = b.grant(&claim(&[("h", 1)], 2)).unwrap();
        assert_eq!((a.per_source, c.per_source), (2, 2));
        assert_eq!(b.held("h"), 4);
        assert_eq!(b.grant(&claim(&[("h", 1)], 2)), None);
        assert_eq!(b.held("h"), 4, "a refused claim reserves nothing");
        b.release(&a);
        assert_eq!(b.grant(&claim(&[("h", 1)], 1)).unwrap().per_source, 2);
    }

    #[test]
    fn an_object_with_more_mirrors_on_a_host_than_its_ceiling_runs_alone() {
        let mut b = Budget::new(1, 16);
        let g = b.grant(&claim(&[("h", 3)], 1)).unwrap();
        assert_eq!(g.per_source, 1);
        assert_eq!(b.grant(&claim(&[("h", 1)], 1)), None);
    }

    proptest! {
        /// Whatever objects start and end, in whatever order, the grants held on a host never
        /// sum past its ceiling (unless one object alone was over it), nor the totals past
        /// the total.
        #[test]
        fn held_grants_never_exceed_the_ceilings(
            per_host in 1usize..6,
            total in 1usize..12,
            steps in proptest::collection::vec((0usize..3, 1usize..3, 1usize..5, any::<bool>()), 1..60),
        ) {
            let hosts = ["a", "b", "c"];
            let mut b = Budget::new(per_host, total);
            let mut running: Vec<Grant> = Vec::new();
            for (h, n, sharing, end) in steps {
                if end && !running.is_empty() {
                    let g = running.remove(0);
                    b.release(&g);
                    continue;
                }
                let c = claim(&[(hosts[h], 1), (hosts[(h + 1) % 3], n)], sharing);
                if let Some(g) = b.grant(&c) {
                    prop_assert!(g.per_source >= 1 && g.total >= 1);
                    running.push(g);
                }
                let sum_total: usize = running.iter().map(|g| g.total).sum();
                prop_assert_eq!(sum_total, b.held_total);
                prop_assert!(sum_total <= total);
                for host in hosts {
                    let on: Vec<usize> = running.iter().filter_map(|g| g.hosts.get(host).copied()).collect();
                    let s: usize = on.iter().sum();
                    prop_assert_eq!(s, b.held(host));
                    prop_assert!(s <= per_host || on.len() == 1, "{} holds {} > {}", host, s, per_host);
                }
            }
        }
    }
}
