// A Java monitor contended by THREADS threads: each increments one shared counter inside
// `synchronized`, so waiters spin in HotSpot's ObjectMonitor before they park.
// Usage: java ContendedMonitor SECONDS THREADS
public class ContendedMonitor {
    static final Object LOCK = new Object();
    static long counter;
    static volatile boolean stop;

    static void incrementUnderLock() {
        synchronized (LOCK) {
            // A little work while holding the lock, so others find it taken.
            for (int i = 0; i < 20; i++) counter += i ^ (counter >>> 3);
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        int threads = Integer.parseInt(args[1]);
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            ts[t] = new Thread(() -> { while (!stop) incrementUnderLock(); }, "worker-" + t);
            ts[t].start();
        }
        Thread.sleep((long) (seconds * 1000));
        stop = true;
        for (Thread t : ts) t.join();
        System.out.println(counter);
    }
}
