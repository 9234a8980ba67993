use super::*;
use core::mem::size_of;

/// The share of `n` clock readings `start, start + step, ...` that [`cost_sampled`]
/// picks, times [`COST_SAMPLE_EVERY`]: 1.0 is one run in 64.
fn sampled_share(start: u64, step: u64, n: u32) -> f64 {
    let picked = (0..u64::from(n))
        .filter(|i| cost_sampled(start.wrapping_add(i * step)))
        .count();
    let per = u32::try_from(COST_SAMPLE_EVERY).unwrap();
    f64::from(u32::try_from(picked).unwrap()) * f64::from(per) / f64::from(n)
}

#[test]
fn about_one_run_in_64_times_itself_whatever_steps_the_clock_takes() {
    // A nanosecond TSC; QEMU's 10 ns HPET from an odd and an even start (the low
    // 6 bits of the odd one's readings are never clear: the sample it once took
    // picked no run at all); a 4 ms jiffies clock; readings 1 µs apart.
    for (start, step) in [
        (1_000_000_007, 1),
        (3_214_567_891, 10),
        (3_214_567_890, 10),
        (4_000_000, 4_000_000),
        (17, 1_024),
        (123_456_789, 1_000),
    ] {
        let share = sampled_share(start, step, 640_000);
        assert!(
            (0.9..1.1).contains(&share),
            "start {start}, step {step} ns: {share:.3} of one run in 64 timed"
        );
    }
}

#[test]
fn layouts_have_no_implicit_padding() {
    assert_eq!(size_of::<HistKey>(), 8 + 2 + 2 + 4);
    assert_eq!(size_of::<Stat>(), 32);
    assert_eq!(size_of::<ProbeCounters>(), 80);
    assert_eq!(
        size_of::<Thread>(),
        8 + 8 + 8 * crate::probe::TIMED_COUNT as usize + 8 + 8 + 8 + 16 + 16 * FRAME_PLACES
    );
    assert_eq!(size_of::<CgroupEvent>(), 8 + 4 + 4 + CGROUP_PATH_MAX);
    assert_eq!(
        size_of::<SlowCallEvent>(),
        8 + 4 + 4 + 16 + 8 + 2 + 2 + 4 + 8 + 8
    );
    assert_eq!(size_of::<SlowBudget>(), 16);
    assert_eq!(size_of::<CounterKey>(), 16);
    assert_eq!(size_of::<RmdirLocks>(), 16);
    assert_eq!(size_of::<RmdirSlot>(), 24);
    assert_eq!(size_of::<Frames>(), 8);
}

#[test]
fn slow_calls_are_limited_to_a_burst_then_the_rate() {
    let mut b = SlowBudget::default();
    let t0 = 1_000_000_000;
    // A tight loop: the first burst goes out, the rest of the same instant does not.
    let sent = (0..1000).filter(|_| b.take(t0)).count();
    assert_eq!(sent, usize::try_from(SLOW_CALLS_BURST).unwrap());
    // One second later, one second's worth more, however many try.
    let sent = (0..1000).filter(|_| b.take(t0 + 1_000_000_000)).count();
    assert_eq!(sent, usize::try_from(SLOW_CALLS_PER_S).unwrap());
    // A quiet minute does not bank more than a burst.
    let sent = (0..1000).filter(|_| b.take(t0 + 61_000_000_000)).count();
    assert_eq!(sent, usize::try_from(SLOW_CALLS_BURST).unwrap());
    // Calls spaced at the rate all go out.
    let mut t = t0 + 62_000_000_000;
    for _ in 0..500 {
        t += SLOW_CALL_COST_NS;
        assert!(b.take(t));
    }
}

#[test]
fn every_probe_caller_and_bucket_has_its_own_overflow_slot() {
    use crate::{NO_CALLER, PROBES, hist::BUCKETS, probe::FUNCTIONS};
    let callers = FUNCTIONS.iter().map(|f| f.id()).chain([NO_CALLER]);
    for p in PROBES {
        for caller in callers.clone() {
            for bucket in [0, 1, BUCKETS / 2, BUCKETS - 1] {
                let i = overflow_index(p.id(), caller, bucket);
                assert!(i < OVERFLOW_ENTRIES, "{p:?} {caller} {bucket}: {i}");
                // A slot that reads back as its own key is no other key's.
                assert_eq!(overflow_key(i), (p.id(), caller, bucket));
            }
        }
    }
    // Only kernel functions enclose calls: they are the first ids.
    assert!(
        FUNCTIONS
            .iter()
            .all(|f| u32::from(f.id()) < crate::probe::FUNCTION_COUNT)
    );
    assert_eq!(COUNTER_KINDS, CounterId::LockWaitersBlocked as u32 + 1);
}

#[test]
fn a_hist_keys_bucket_carries_its_calls_event_above_the_index() {
    use crate::hist::BUCKETS;
    let key = |bucket| HistKey {
        cgroup: 7,
        probe: crate::Probe::DDelete.id(),
        caller: crate::NO_CALLER,
        bucket,
    };
    let events = [
        None,
        Some(CounterId::NegativeDentries),
        Some(CounterId::DroppedDentries),
    ];
    for index in [0, 1, BUCKETS / 2, BUCKETS - 1] {
        let buckets = events.map(|e| HistKey::bucket_with(index, e));
        for (e, b) in events.iter().zip(buckets) {
            assert_eq!(key(b).bucket_index(), index);
            assert_eq!(key(b).event(), *e);
        }
        // Without an event the key is the bucket index alone (every other probe's).
        assert_eq!(buckets[0], index);
        // Each event its own key, in the same bucket.
        assert!(buckets[0] != buckets[1] && buckets[1] != buckets[2]);
    }
    for id in 0..COUNTER_KINDS {
        assert_eq!(CounterId::from_id(id).map(|c| c as u32), Some(id));
    }
    assert_eq!(CounterId::from_id(COUNTER_KINDS), None);
}

#[test]
fn loss_names_round_trip() {
    for l in Loss::ALL {
        assert_eq!(Loss::from_name(l.name()), Some(l));
        assert_eq!(l as usize, Loss::ALL.iter().position(|k| *k == l).unwrap());
    }
}

#[test]
fn frames_track_the_innermost_caller() {
    let mut t = Thread::IDLE;
    assert_eq!(t.frames.top(), None);
    // deactivate_locked_super > unregister_shrinker > synchronize_srcu
    for id in [6, 4, 0] {
        t.push_frame(id, FramePlace::NONE);
    }
    assert_eq!(t.frames.top(), Some(0));
    assert!(t.pop_frame(0));
    assert_eq!(t.frames.top(), Some(4));
    // A missed return of 4: popping 6 drops 4 too.
    assert!(t.pop_frame(6));
    assert_eq!(t.frames, Frames::EMPTY);
    let mut u = Thread::IDLE;
    u.push_frame(3, FramePlace::NONE);
    assert!(!u.pop_frame(9));
    assert_eq!(
        u.frames.top(),
        Some(3),
        "a probe not on the stack drops nothing"
    );
}

#[test]
fn frames_deeper_than_the_stack_lose_the_outermost() {
    let mut t = Thread::IDLE;
    for id in 0..10 {
        t.push_frame(id, FramePlace::NONE);
    }
    assert_eq!(t.frames.top(), Some(9));
    let mut fell_off = t;
    assert!(t.pop_frame(2));
    assert_eq!(t.frames, Frames { stack: u64::MAX });
    assert!(!fell_off.pop_frame(1), "fell off");
}

#[test]
fn frame_places_move_with_their_frames() {
    let mut t = Thread::IDLE;
    // deactivate_locked_super > unregister_shrinker > synchronize_srcu > its expedited
    // form, each called deeper on the stack.
    let place = |at: u64| FramePlace {
        at,
        word: at + 1,
        chain: 0,
    };
    t.push_frame(6, place(0x4000));
    t.push_frame(4, place(0x3f00));
    t.push_frame(0, place(0x3e00));
    assert_eq!(t.frame_at, [0x3e00, 0x3f00, 0x4000]);
    t.push_frame(1, place(0x3d00));
    assert_eq!(
        t.frame_at,
        [0x3d00, 0x3e00, 0x3f00],
        "the outermost place falls off"
    );
    assert_eq!(
        t.frame_word,
        [0x3d01, 0x3e01, 0x3f01],
        "each word with its place"
    );
    // synchronize_srcu returns: its frame and the expedited one above (a missed return)
    // go, and unregister_shrinker's place is the top's again.
    assert!(t.pop_frame(0));
    assert_eq!(t.frames.top(), Some(4));
    assert_eq!(
        t.frame_at,
        [0x3f00, 0, 0],
        "the places that fell off are not known"
    );
    assert_eq!(t.top_place(), place(0x3f00));
    assert!(!t.pop_frame(9));
    t.drop_top_frame();
    assert_eq!(t.frames.top(), Some(6));
    assert_eq!(
        t.top_place(),
        FramePlace::default(),
        "a frame whose place fell off is trusted"
    );
    t.clear_frames();
    assert_eq!(
        (t.frames, t.frame_at, t.frame_word),
        (Frames::EMPTY, [0; FRAME_PLACES], [0; FRAME_PLACES])
    );
}

#[test]
fn an_fentry_call_is_active_while_its_trampolines_return_into_it_sits_below() {
    let f = 0xffff_ffff_8123_4560;
    // Past a 5-byte call, or past endbr64 and the call.
    assert!(returns_into(f + 5, f));
    assert!(returns_into(f + 9, f));
    // Returned: the stack there holds other calls' words.
    assert!(!returns_into(f + 6, f));
    assert!(!returns_into(0xffff_c900_0001_3e58, f));
    assert!(!returns_into(f - 5, f));
    // No mark: nothing tells a call active.
    assert!(!returns_into(5, 0));
}
