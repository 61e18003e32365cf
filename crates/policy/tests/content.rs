//! `content` policy: urgency first, then text < unknown < media, FIFO within a level, guard.

use policy::content::{level, Content, MEDIA_LEVEL, TEXT_LEVEL, UNKNOWN_LEVEL};
use policy::{build, ContentClass, Ctx, Hints, Policy, PolicyConfig, Sched};

fn h(class: ContentClass, urgency: Option<u8>) -> Hints {
    Hints {
        class,
        urgency,
        container: 0,
    }
}

const BUSY: Ctx = Ctx {
    now: 0,
    busy: 1,
    slots: 1,
};

fn at(now: u64) -> Ctx {
    Ctx { now, ..BUSY }
}

#[test]
fn mapping_of_classes_and_urgencies() {
    assert_eq!(level(&h(ContentClass::Text, None)), TEXT_LEVEL);
    assert_eq!(level(&h(ContentClass::Unknown, None)), UNKNOWN_LEVEL);
    assert_eq!(level(&h(ContentClass::Media, None)), MEDIA_LEVEL);
    assert_eq!(level(&h(ContentClass::Media, Some(0))), 0);
    assert_eq!(level(&h(ContentClass::Text, Some(6))), 6);
    assert_eq!(level(&h(ContentClass::Text, Some(200))), 7);
}

#[test]
fn urgency_wins_then_class_then_fifo() {
    let mut c = Content::new(None);
    c.enqueue(1, &h(ContentClass::Media, None), &BUSY);
    c.enqueue(2, &h(ContentClass::Unknown, None), &BUSY);
    c.enqueue(3, &h(ContentClass::Text, None), &BUSY);
    c.enqueue(4, &h(ContentClass::Media, Some(1)), &BUSY);
    c.enqueue(5, &h(ContentClass::Text, Some(7)), &BUSY);
    c.enqueue(6, &h(ContentClass::Text, None), &BUSY);
    c.enqueue(7, &h(ContentClass::Media, None), &BUSY);
    assert_eq!(c.order(), vec![4, 3, 6, 2, 1, 7, 5]);
    assert!(c.remove(6));
    let served: Vec<_> = std::iter::from_fn(|| c.dequeue(&BUSY)).collect();
    assert_eq!(served, vec![4, 3, 2, 1, 7, 5]);
    assert_eq!(c.stats().starvation_rescues, 0);
}

#[test]
fn guard_serves_old_media_before_new_text() {
    let mut c = Content::new(Some(100));
    c.enqueue(1, &h(ContentClass::Media, None), &at(0));
    c.enqueue(2, &h(ContentClass::Text, None), &at(50));
    c.enqueue(3, &h(ContentClass::Text, None), &at(60));
    assert_eq!(
        c.dequeue(&at(100)),
        Some(2),
        "media waited exactly the bound"
    );
    assert_eq!(c.dequeue(&at(101)), Some(1), "media waited past the bound");
    assert_eq!(c.stats().starvation_rescues, 1);
    assert_eq!(c.dequeue(&at(102)), Some(3));

    // Off: text keeps overtaking.
    let mut c = Content::new(None);
    c.enqueue(1, &h(ContentClass::Media, None), &at(0));
    c.enqueue(2, &h(ContentClass::Text, None), &at(50));
    assert_eq!(c.dequeue(&at(1_000_000)), Some(2));
}

#[test]
fn marks_urgent_work_and_forgets_exited_workers() {
    let mut s = Sched::new(1, build("content", &PolicyConfig::default()).unwrap());
    s.ready(1, 0, &h(ContentClass::Media, None));
    s.ready(2, 0, &h(ContentClass::Media, None));
    s.ready(3, 0, &h(ContentClass::Text, None));
    s.ready(4, 0, &h(ContentClass::Unknown, Some(0)));
    assert_eq!(s.policy().order(), vec![4, 3, 2]);
    assert!(s.marked(3) && s.marked(4) && !s.marked(2));
    assert_eq!(s.policy().stats().promotions, 2, "3 and 4 overtook 2");
    for w in 1..=4 {
        s.exit(w, 10);
    }
    assert!(!s.marked(3));
    assert_eq!((s.busy(), s.queued()), (0, 0));
}
