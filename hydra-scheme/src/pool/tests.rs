use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

const TTL: Duration = Duration::from_secs(30);

/// A server and a user on it; the ceiling counts by server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    host: &'static str,
    user: &'static str,
}

impl PoolKey for Key {
    type Host = &'static str;

    fn host(&self) -> &'static str {
        self.host
    }
}

struct Fake {
    id: u32,
    key: Key,
    open: Arc<AtomicBool>,
    ready: bool,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Pooled for Fake {
    type Key = Key;

    fn key(&self) -> &Key {
        &self.key
    }

    fn is_reusable(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    fn is_ready(&self) -> bool {
        self.ready
    }
}

fn key(user: &'static str) -> Key {
    Key { host: "h", user }
}

fn fake(id: u32, key: Key) -> Fake {
    Fake {
        id,
        key,
        open: Arc::new(AtomicBool::new(true)),
        ready: true,
        _permit: None,
    }
}

/// A connection holding a place under `pool`'s ceiling, if there is one.
fn admitted(pool: &IdlePool<Fake>, id: u32, key: Key) -> Option<Fake> {
    let permit = pool.admit(&key)?;
    Some(Fake {
        _permit: Some(permit),
        ..fake(id, key)
    })
}

fn ids(taken: &[Option<Fake>]) -> Vec<Option<u32>> {
    taken.iter().map(|c| c.as_ref().map(|c| c.id)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_slot_gets_back_its_own_connection_first_then_the_last_put_back() {
    let pool = IdlePool::new(TTL);
    pool.put(fake(1, key("a")), Some(ConnId(1)));
    pool.put(fake(2, key("a")), Some(ConnId(2)));
    pool.put(fake(3, key("a")), None);
    let taken = [
        pool.take(&key("a"), Some(ConnId(1))),
        pool.take(&key("a"), Some(ConnId(9))),
        pool.take(&key("a"), None),
        pool.take(&key("a"), None),
    ];
    assert_eq!(ids(&taken), [Some(1), Some(3), Some(2), None]);
}

#[tokio::test(start_paused = true)]
async fn connections_of_another_key_are_never_taken() {
    let pool = IdlePool::new(TTL);
    pool.put(fake(1, key("a")), Some(ConnId(1)));
    assert!(pool.take(&key("b"), Some(ConnId(1))).is_none());
    assert_eq!(pool.idle_for(&key("a")), 1);
}

#[tokio::test(start_paused = true)]
async fn a_connection_idle_for_the_timeout_has_expired() {
    let pool = IdlePool::new(TTL);
    pool.put(fake(1, key("a")), None);
    tokio::time::advance(TTL - Duration::from_millis(1)).await;
    assert_eq!(pool.idle_for(&key("a")), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(pool.idle_for(&key("a")), 0);
    assert!(pool.take(&key("a"), None).is_none());
    assert_eq!(pool.idle_count(), 0, "the expired connection was dropped");
}

#[tokio::test(start_paused = true)]
async fn an_unreusable_connection_is_neither_kept_nor_taken() {
    let pool = IdlePool::new(TTL);
    let closed = fake(1, key("a"));
    closed.open.store(false, Ordering::Relaxed);
    pool.put(closed, None);
    assert_eq!(pool.idle_count(), 0);
    let later = fake(2, key("a"));
    let open = later.open.clone();
    pool.put(later, None);
    open.store(false, Ordering::Relaxed);
    assert!(pool.take(&key("a"), None).is_none());
}

#[tokio::test(start_paused = true)]
async fn ready_connections_are_taken_before_the_slots_own() {
    let pool = IdlePool::new(TTL);
    let busy = Fake {
        ready: false,
        ..fake(1, key("a"))
    };
    pool.put(busy, Some(ConnId(1)));
    pool.put(fake(2, key("a")), Some(ConnId(2)));
    let first = pool.take(&key("a"), Some(ConnId(1)));
    let then = pool.take(&key("a"), Some(ConnId(1)));
    assert_eq!(ids(&[first, then]), [Some(2), Some(1)]);
}

#[tokio::test(start_paused = true)]
async fn past_the_idle_cap_the_oldest_idle_connection_goes() {
    let pool = IdlePool::new(TTL).max_idle_per_key(2);
    for id in 1..=3 {
        pool.put(fake(id, key("a")), None);
    }
    assert_eq!(pool.idle_for(&key("a")), 2);
    let taken = [pool.take(&key("a"), None), pool.take(&key("a"), None)];
    assert_eq!(ids(&taken), [Some(3), Some(2)]);

    let none = IdlePool::new(TTL).max_idle_per_key(0);
    none.put(fake(1, key("a")), None);
    assert_eq!(none.idle_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_host_ceiling_counts_live_connections_across_take_put_and_drop() {
    let pool = IdlePool::new(TTL).ceiling_per_host(2);
    let a = admitted(&pool, 1, key("a")).expect("under the ceiling");
    let b = admitted(&pool, 2, key("b")).expect("another user, same host");
    assert!(admitted(&pool, 3, key("a")).is_none(), "both places busy");
    assert!(
        pool.admit(&Key {
            host: "g",
            user: "a"
        })
        .is_some(),
        "another host has its own ceiling"
    );
    // Put back and taken again, a connection keeps its place.
    pool.put(a, None);
    let a = pool.take(&key("a"), None).expect("idle");
    assert!(admitted(&pool, 3, key("a")).is_none());
    // At the ceiling, the host's oldest idle connection (any user) is closed to make room.
    pool.put(a, None);
    let c = admitted(&pool, 3, key("b")).expect("room made");
    assert_eq!(pool.idle_count(), 0);
    assert!(pool.take(&key("a"), None).is_none());
    drop((b, c));
    assert_eq!(pool.ceiling_of(&key("a")).available_permits(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_checkout_frees_its_permit() {
    let pool = IdlePool::new(TTL).ceiling_per_host(1);
    pool.put(admitted(&pool, 1, key("a")).expect("first"), None);
    let out = pool.take(&key("a"), None).expect("checked out");
    assert!(
        pool.admit(&key("a")).is_none(),
        "the checkout holds the place"
    );
    drop(out);
    assert!(admitted(&pool, 2, key("a")).is_some());
}

#[tokio::test(start_paused = true)]
async fn a_ceiling_of_zero_still_admits_one_connection() {
    let pool: IdlePool<Fake> = IdlePool::new(TTL).ceiling_per_host(0);
    let one = pool.admit(&key("a"));
    assert!(one.is_some());
    assert!(pool.admit(&key("a")).is_none());
}

#[tokio::test(start_paused = true)]
async fn an_opening_ahead_closes_nothing_and_wakes_waiters_when_it_ends() {
    let pool = IdlePool::new(TTL).ceiling_per_host(2);
    pool.put(admitted(&pool, 1, key("a")).expect("first"), None);
    let (permit, opening) = pool.admit_ahead(&key("a")).expect("one place left");
    assert!(pool.is_opening(&key("a")));
    assert!(
        pool.admit_ahead(&key("a")).is_none(),
        "no idle one is closed"
    );
    assert_eq!(pool.idle_count(), 1);
    let changed = pool.changed();
    drop(opening);
    tokio::time::timeout(Duration::from_secs(1), changed)
        .await
        .expect("the end of the opening wakes waiters");
    assert!(!pool.is_opening(&key("a")));
    drop(permit);
}

#[tokio::test(start_paused = true)]
async fn putting_a_connection_back_wakes_waiters() {
    let pool = IdlePool::new(TTL);
    let changed = pool.changed();
    pool.put(fake(1, key("a")), None);
    tokio::time::timeout(Duration::from_secs(1), changed)
        .await
        .expect("the put wakes waiters");
}

#[test]
fn closing_a_key_s_idle_connections_leaves_other_keys_and_frees_their_places() {
    let pool = IdlePool::new(TTL).ceiling_per_host(2);
    pool.put(admitted(&pool, 1, key("a")).expect("first"), None);
    pool.put(admitted(&pool, 2, key("a")).expect("second"), None);
    pool.put(fake(3, key("b")), None);
    assert_eq!(pool.close_idle(&key("a")), 2);
    assert_eq!(pool.idle_for(&key("a")), 0);
    assert_eq!(pool.idle_for(&key("b")), 1);
    assert!(pool.take(&key("a"), None).is_none());
    assert!(
        pool.admit_ahead(&key("a")).is_some(),
        "their places under the ceiling are free again"
    );
}
