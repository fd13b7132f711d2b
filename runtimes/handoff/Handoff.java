// The seed's producer/consumer handoff with Java's monitors (synchronized, wait/notifyAll)
// and with java.util.concurrent's ReentrantLock and Condition.
// Usage and output format: README.md beside this file.
// Build: javac -d OUT Handoff.java; run: java -cp OUT Handoff VARIANT ...

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

public final class Handoff {
    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    static long threadCpuNs() {
        return THREADS.getCurrentThreadCpuTime();
    }

    static long processCpuNs() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    // Busy work for ms of wall time, as the seed's SimulateWork: the thread keeps its CPU.
    static void busy(double ms) {
        long end = System.nanoTime() + (long) (ms * 1e6);
        while (System.nanoTime() < end) {
        }
    }

    // State shared by both variants; the variant supplies the lock discipline.
    abstract static class Run {
        final long items;
        final double workMs, delayMs;
        final CyclicBarrier start = new CyclicBarrier(2);
        long pending; // guarded by the variant's lock
        long completed; // written by the worker only
        long senderLockWaitNs, senderWaitCpuNs, workerWaitCpuNs;
        long workerStart, workerEnd, senderStart, senderEnd;

        Run(long items, double workMs, double delayMs) {
            this.items = items;
            this.workMs = workMs;
            this.delayMs = delayMs;
        }

        abstract void workerStep() throws InterruptedException;

        abstract void senderStep();

        void processPending() {
            long n = pending;
            for (long i = 0; i < n; i++) {
                busy(workMs); // under the lock, as in the seed
                completed++;
            }
            pending = 0;
        }

        void worker() throws Exception {
            start.await();
            workerStart = System.nanoTime();
            while (completed < items) {
                workerStep();
            }
            workerEnd = System.nanoTime();
        }

        void sender() throws Exception {
            start.await();
            senderStart = System.nanoTime();
            for (long i = 0; i < items; i++) {
                senderStep();
                busy(delayMs);
            }
            senderEnd = System.nanoTime();
        }
    }

    static final class SynchronizedRun extends Run {
        final Object monitor = new Object();

        SynchronizedRun(long items, double workMs, double delayMs) {
            super(items, workMs, delayMs);
        }

        void workerStep() throws InterruptedException {
            long cpu0 = threadCpuNs();
            synchronized (monitor) {
                while (pending == 0) {
                    monitor.wait();
                }
                workerWaitCpuNs += threadCpuNs() - cpu0;
                processPending();
            }
        }

        void senderStep() {
            long cpu0 = threadCpuNs();
            long t0 = System.nanoTime();
            synchronized (monitor) {
                senderLockWaitNs += System.nanoTime() - t0;
                senderWaitCpuNs += threadCpuNs() - cpu0;
                pending++;
                monitor.notifyAll();
            }
        }
    }

    static final class ReentrantLockRun extends Run {
        final ReentrantLock lock = new ReentrantLock();
        final Condition cond = lock.newCondition();

        ReentrantLockRun(long items, double workMs, double delayMs) {
            super(items, workMs, delayMs);
        }

        void workerStep() throws InterruptedException {
            long cpu0 = threadCpuNs();
            lock.lock();
            try {
                while (pending == 0) {
                    cond.await();
                }
                workerWaitCpuNs += threadCpuNs() - cpu0;
                processPending();
            } finally {
                lock.unlock();
            }
        }

        void senderStep() {
            long cpu0 = threadCpuNs();
            long t0 = System.nanoTime();
            lock.lock();
            try {
                senderLockWaitNs += System.nanoTime() - t0;
                senderWaitCpuNs += threadCpuNs() - cpu0;
                pending++;
                cond.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    static void die(int code, String msg) {
        System.err.println("handoff: " + msg);
        System.exit(code);
    }

    static String num(double v) {
        return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            die(2, "usage: Handoff synchronized|reentrantlock ITEMS WORK_MS REPETITIONS DELAY_MS[,DELAY_MS...]");
        }
        String variant = args[0];
        if (!variant.equals("synchronized") && !variant.equals("reentrantlock")) {
            die(2, "unknown variant '" + variant + "' (synchronized or reentrantlock)");
        }
        long items = 0, reps = 0;
        double workMs = -1;
        List<Double> delays = new ArrayList<>();
        try {
            items = Long.parseLong(args[1]);
            workMs = Double.parseDouble(args[2]);
            reps = Long.parseLong(args[3]);
            for (String tok : args[4].split(",")) {
                double d = Double.parseDouble(tok);
                if (d < 0) {
                    die(2, "bad delay '" + tok + "'");
                }
                delays.add(d);
            }
        } catch (NumberFormatException e) {
            die(2, "bad number: " + e.getMessage());
        }
        if (items <= 0 || workMs < 0 || reps <= 0) {
            die(2, "ITEMS and REPETITIONS must be positive, WORK_MS not negative");
        }
        if (!THREADS.isCurrentThreadCpuTimeSupported()) {
            die(1, "this JVM has no per-thread CPU clock");
        }
        THREADS.setThreadCpuTimeEnabled(true);

        System.out.println("cpudoctor-handoff 1 runtime=java variant=" + variant);
        int runs = 0;
        for (double delay : delays) {
            for (long rep = 0; rep < reps; rep++) {
                Run r = variant.equals("synchronized")
                        ? new SynchronizedRun(items, workMs, delay)
                        : new ReentrantLockRun(items, workMs, delay);
                Throwable[] failure = new Throwable[1];
                Thread w = new Thread(() -> {
                    try {
                        r.worker();
                    } catch (Throwable t) {
                        failure[0] = t;
                    }
                }, "worker");
                Thread s = new Thread(() -> {
                    try {
                        r.sender();
                    } catch (Throwable t) {
                        failure[0] = t;
                    }
                }, "sender");
                long p0 = processCpuNs();
                w.start();
                s.start();
                w.join();
                s.join();
                long pcpu = processCpuNs() - p0;
                if (failure[0] != null) {
                    die(1, "run failed: " + failure[0]);
                }
                long wall = Math.max(r.workerEnd, r.senderEnd) - Math.min(r.workerStart, r.senderStart);
                System.out.println("run delay_ms=" + num(delay) + " rep=" + rep + " items=" + items
                        + " work_ms=" + num(workMs) + " items_done=" + r.completed + " wall_ns=" + wall
                        + " sender_lock_wait_ns=" + r.senderLockWaitNs
                        + " sender_wait_cpu_ns=" + r.senderWaitCpuNs
                        + " worker_wait_cpu_ns=" + r.workerWaitCpuNs
                        + " process_cpu_ns=" + pcpu);
                runs++;
            }
        }
        System.out.println("end runs=" + runs);
    }
}
