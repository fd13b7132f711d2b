//! A contended `std::sync::Mutex` in a Rust release build (no frame pointers): four threads
//! take the lock in `add_under_lock`, called from each thread's loop in `worker_loop`, for
//! argv[1] seconds (default 2). diagnose must show the chain from `worker_loop` down to the
//! lock's spin or futex wait.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[inline(never)]
fn add_under_lock(counter: &Mutex<u64>, n: u64) {
    let mut c = counter.lock().unwrap();
    // Work under the lock, so the others spin and then wait in the futex.
    for i in 0..200 {
        *c = std::hint::black_box(c.wrapping_mul(31).wrapping_add(n ^ i));
    }
}

#[inline(never)]
fn worker_loop(counter: &Mutex<u64>, until: Instant) {
    let mut n = 0u64;
    while Instant::now() < until {
        add_under_lock(counter, n);
        n += 1;
    }
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2.0);
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let counter = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let c = Arc::clone(&counter);
            std::thread::spawn(move || worker_loop(&c, until))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    println!("{}", counter.lock().unwrap());
}
