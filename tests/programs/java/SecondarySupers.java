// JDK-8180450 reproduction: threads type-check the same classes against different
// interfaces, so each check misses the class's one-element secondary-super cache, scans the
// secondary supers (repne scas on JDK < 23) and writes the cache the other thread just wrote.
// Usage: java SecondarySupers SECONDS THREADS
public class SecondarySupers {
    interface I0 {} interface I1 {} interface I2 {} interface I3 {}
    interface I4 {} interface I5 {} interface I6 {} interface I7 {}
    static final class A implements I0, I1, I2, I3, I4, I5, I6, I7 {}
    static final class B implements I0, I1, I2, I3, I4, I5, I6, I7 {}
    static final class C implements I0, I1, I2, I3, I4, I5, I6, I7 {}

    // Three receiver classes keep C2 from folding the check on a profiled exact type.
    static final Object[] OBJECTS = {new A(), new B(), new C()};
    static volatile boolean stop;

    static int checkI0(Object[] objs) { int n = 0; for (Object o : objs) if (o instanceof I0) n++; return n; }
    static int checkI7(Object[] objs) { int n = 0; for (Object o : objs) if (o instanceof I7) n++; return n; }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        int threads = Integer.parseInt(args[1]);
        long[] counts = new long[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                long n = 0;
                while (!stop) n += (id % 2 == 0) ? checkI0(OBJECTS) : checkI7(OBJECTS);
                counts[id] = n;
            }, "checker-" + t);
            ts[t].start();
        }
        Thread.sleep((long) (seconds * 1000));
        stop = true;
        long total = 0;
        for (int t = 0; t < threads; t++) { ts[t].join(); total += counts[t]; }
        System.out.println(total);
    }
}
