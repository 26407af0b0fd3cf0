//! The reader pool of the direct reads (`io.zig`): a read request is split
//! into at most `max_chunks` aligned chunks that a few dedicated threads,
//! fed from a bounded queue, read in parallel with pread, retried on EINTR.
//! The request completes through shared memory (`Request.state`, an atomic,
//! and `Request.status`); a waiter spins briefly, then sleeps on a futex.
//! Nothing ever calls back into JavaScript. The size and modification time
//! recorded at open are compared again before every chunk is read.

const std = @import("std");
const abi = @import("abi.zig");
const io = @import("io.zig");

const assert = std.debug.assert;
const c = std.c;
const linux = std.os.linux;
const Atomic = std.atomic.Value;
const Futex = std.Thread.Futex;
const Error = io.Error;
const default_readers = io.default_readers;
const max_chunks = io.max_chunks;
const queue_capacity = io.queue_capacity;

/// Spins (each a `pause`) of a waiter before it sleeps on the futex.
const spin_limit: u32 = 2_000;
/// Bound on pread calls for one chunk (each either advances or was EINTR).
const max_attempts: u32 = 1 << 20;

pub const State = enum(u32) { idle = 0, pending = 1, done = 2, failed = 3 };

/// One read into memory that stays valid until it completes. Everything but
/// the atomics is fixed while the request is pending.
pub const Request = struct {
    state: Atomic(u32) = .init(@intFromEnum(State.idle)),
    /// 0, or the first failure of any chunk (a status code).
    status: Atomic(i32) = .init(0),
    /// Chunks not finished yet.
    remaining: Atomic(u32) = .init(0),
    fd: c.fd_t = -1,
    direct: bool = false,
    alignment: usize = 1,
    dst: [*]u8 = undefined,
    start: u64 = 0,
    len: usize = 0,
    need: usize = 0,
    chunk: usize = 0,
    n_chunks: u32 = 0,
    /// The file's size and modification time when it was opened.
    file_size: i64 = 0,
    mtime_sec: i64 = 0,
    mtime_nsec: i64 = 0,
    /// Counters of the stage (static memory, outlives the request).
    bytes: *Atomic(u64) = undefined,
    inflight: *Atomic(u32) = undefined,

    pub fn loadState(r: *const Request) State {
        return @enumFromInt(r.state.load(.acquire));
    }
};

const Entry = struct { req: *Request, chunk: u32 };

const Readers = struct {
    mutex: std.Thread.Mutex = .{},
    cond: std.Thread.Condition = .{},
    threads: [default_readers]std.Thread = undefined,
    n: u32 = 0,
    stopping: bool = false,
    queue: [queue_capacity]Entry = undefined,
    head: usize = 0,
    count: usize = 0,

    /// Queues every chunk of `req` (already pending), starting the readers
    /// on first use.
    fn submit(self: *Readers, req: *Request) Error!void {
        assert(req.n_chunks >= 1 and req.n_chunks <= max_chunks);
        self.mutex.lock();
        defer self.mutex.unlock();
        if (self.stopping) return error.Busy;
        if (self.n == 0) {
            while (self.n < default_readers) {
                self.threads[self.n] = std.Thread.spawn(.{ .stack_size = 128 * 1024 }, readerMain, .{self}) catch break;
                self.n += 1;
            }
            if (self.n == 0) return error.NoMemory;
        }
        // One request per slot at most, every slot counted in max_total_slots.
        assert(self.count + req.n_chunks <= queue_capacity);
        for (0..req.n_chunks) |i| {
            self.queue[(self.head + self.count) % queue_capacity] = .{ .req = req, .chunk = @intCast(i) };
            self.count += 1;
        }
        self.cond.broadcast();
    }

    /// Stops and joins the readers after they have emptied the queue (every
    /// queued read completes). They start again on the next read.
    fn stop(self: *Readers) void {
        self.mutex.lock();
        if (self.n == 0) {
            self.mutex.unlock();
            return;
        }
        self.stopping = true;
        self.cond.broadcast();
        const n = self.n;
        self.mutex.unlock();
        for (self.threads[0..n]) |t| t.join();
        self.mutex.lock();
        assert(self.count == 0);
        self.n = 0;
        self.stopping = false;
        self.mutex.unlock();
    }

    fn readerMain(self: *Readers) void {
        while (true) {
            self.mutex.lock();
            while (self.count == 0 and !self.stopping) self.cond.wait(&self.mutex);
            if (self.count == 0) {
                assert(self.stopping);
                self.mutex.unlock();
                return;
            }
            const e = self.queue[self.head];
            self.head = (self.head + 1) % queue_capacity;
            self.count -= 1;
            self.mutex.unlock();
            runChunk(e.req, e.chunk);
        }
    }
};

var readers: Readers = .{};

/// Queues every chunk of `req` (already pending), starting the reader
/// threads on first use.
pub fn submit(req: *Request) Error!void {
    return readers.submit(req);
}

/// Stops the reader threads (cf_shutdown, library unload). Reads already
/// queued complete first.
pub fn shutdown() void {
    readers.stop();
}

fn fileChanged(fd: c.fd_t, size: i64, sec: i64, nsec: i64) bool {
    var st: c.Stat = undefined;
    if (c.fstat(fd, &st) != 0) return true;
    const mtime = st.mtime();
    return st.size != size or mtime.sec != sec or mtime.nsec != nsec;
}

fn requestChanged(r: *const Request) bool {
    return fileChanged(r.fd, r.file_size, r.mtime_sec, r.mtime_nsec);
}

/// Reads chunk `index` of `r` on a reader thread and, for the last chunk to
/// finish, publishes the result. Touches nothing of `r` after publishing
/// but the futex word it wakes (whose memory outlives the stage's drain).
fn runChunk(r: *Request, index: u32) void {
    assert(r.loadState() == .pending and index < r.n_chunks);
    const off = @as(usize, index) * r.chunk;
    assert(off < r.len);
    const len = @min(r.chunk, r.len - off);
    const need = @min(len, r.need -| off);
    const status = if (requestChanged(r)) abi.Status.changed.code() else readChunk(r, off, len, need);
    if (status != 0) _ = r.status.cmpxchgStrong(0, status, .acq_rel, .monotonic);
    const inflight = r.inflight;
    if (r.remaining.fetchSub(1, .acq_rel) == 1) {
        const final: State = if (r.status.load(.acquire) == 0) .done else .failed;
        r.state.store(@intFromEnum(final), .release);
        Futex.wake(&r.state, std.math.maxInt(u32));
        if (inflight.fetchSub(1, .acq_rel) == 1) Futex.wake(inflight, std.math.maxInt(u32));
    }
}

/// preads [off, off + len) of the request's span until at least `need`
/// bytes are in. 0 or a status code.
fn readChunk(r: *Request, off: usize, len: usize, need: usize) i32 {
    assert(need <= len);
    var done: usize = 0;
    var attempts: u32 = 0;
    while (done < len) {
        attempts += 1;
        if (attempts > max_attempts) return abi.ioStatus(5);
        const at: i64 = @intCast(r.start + off + done);
        const rc = linux.pread(r.fd, r.dst + off + done, len - done, at);
        switch (linux.E.init(rc)) {
            .SUCCESS => {},
            .INTR, .AGAIN => continue,
            else => |e| return abi.ioStatus(@intCast(@intFromEnum(e))),
        }
        if (rc == 0) break; // end of file
        assert(rc <= len - done);
        done += rc;
        // A direct read ends short only at the end of the file; the next
        // offset would be unaligned.
        if (r.direct and rc % r.alignment != 0) break;
    }
    _ = r.bytes.fetchAdd(done, .monotonic);
    if (done < need) {
        // Shorter than it was at open: truncated (CHANGED), or a file that
        // ends early for another reason (RANGE).
        return if (requestChanged(r)) abi.Status.changed.code() else abi.Status.range.code();
    }
    return 0;
}

/// Blocks until `r` is no longer pending: spins briefly, then sleeps on the
/// futex. Returns the nanoseconds spent.
pub fn block(r: *const Request) u64 {
    if (r.loadState() != .pending) return 0;
    var timer = std.time.Timer.start() catch null;
    var spins: u32 = 0;
    while (spins < spin_limit) : (spins += 1) {
        if (r.loadState() != .pending) break;
        std.atomic.spinLoopHint();
    }
    while (true) {
        const s = r.state.load(.acquire);
        if (s != @intFromEnum(State.pending)) break;
        Futex.wait(&r.state, s);
    }
    return if (timer) |*t| t.read() else 0;
}
