//! Direct reads for a disk-resident expert tier ("staged O_DIRECT expert
//! reads"): files opened with O_DIRECT, a few dedicated reader threads fed
//! from a bounded queue, and staging areas of fixed slots that cache experts
//! by (layer, expert) with least-recently-used eviction.
//!
//! - A file (`openFile`) is opened read-only with O_DIRECT. The alignment
//!   that direct reads need comes from statx(STATX_DIOALIGN) (Linux 6.1+);
//!   on older kernels from st_blksize (at least 512, 4096 when unknown).
//!   Where O_DIRECT is refused (EINVAL) or the filesystem reports no
//!   direct-I/O alignment (tmpfs), the file is read through the page cache
//!   instead, with alignment 1, and `Info.flags` says so.
//! - A read request is split into at most `max_chunks` aligned chunks that
//!   the reader threads read in parallel with pread, retried on EINTR. The
//!   request completes through shared memory: `Request.state` (an atomic,
//!   idle/pending/done/failed) and `Request.status`; a waiter spins briefly,
//!   then sleeps on a futex. Nothing ever calls back into JavaScript.
//!   (`io_readers.zig`: the requests and the reader threads.)
//! - A stage (`createStage`) is one aligned allocation of `n_slots` slots.
//!   A slot holds one expert's bytes, the key naming it, its request, a pin
//!   count and its last use. A slot is never reused while a read into it is
//!   in flight or while anyone holds a pin on it; a stage is not destroyed
//!   while a slot or the stage itself is pinned, and destroying it waits for
//!   every read in flight, so no read ever writes into freed memory.
//!   (`io_stage.zig`: the stages and their slots.)
//!
//! Every size is re-checked here (ranges against the file's size recorded at
//! open, lengths against slots); the size and modification time recorded at
//! open are compared again before every chunk is read (`changed`), as
//! memory.zig does for mappings.

const std = @import("std");
const abi = @import("abi.zig");
const common = @import("handles.zig");

const assert = std.debug.assert;
const c = std.c;
const linux = std.os.linux;

pub const max_path_bytes = common.max_path_bytes;
/// Reader threads started on the first read (and again after `shutdown`).
pub const default_readers: u32 = 4;
/// Largest number of chunks one request is split into.
pub const max_chunks: u32 = 8;
/// Chunks are at least this long (less only for a shorter read).
pub const min_chunk_bytes: usize = 256 * 1024;
/// Slots of one stage, and of every live stage together: with one request
/// per slot at most, the queue never holds more than
/// `max_total_slots * max_chunks` entries and never fills.
pub const max_slots_per_stage: u32 = 4096;
pub const max_total_slots: u32 = 4096;
pub const queue_capacity: usize = @as(usize, max_total_slots) * max_chunks;
/// Largest slot (16 GiB) and largest stage (1 TiB).
pub const max_slot_bytes: usize = 1 << 34;
pub const max_stage_bytes: usize = 1 << 40;
/// Largest direct-I/O alignment accepted (2 MiB); above it, reads go through
/// the page cache.
pub const max_alignment: usize = common.max_alignment;

/// `Info.flags` bit: reads bypass the page cache (O_DIRECT).
pub const flag_direct: u64 = 1;

/// Why a file is read through the page cache (`Info.reason`).
pub const Reason = enum(u64) {
    none = 0,
    /// open(O_DIRECT) failed with EINVAL: the filesystem does not support it.
    refused = 1,
    /// statx(STATX_DIOALIGN) reports no direct-I/O alignment (tmpfs, ...).
    no_dio_align = 2,
    /// The filesystem's direct-I/O alignment exceeds `max_alignment`.
    alignment_too_large = 3,
};

/// What `openFile` reports (cf_io_open's `out_info`, four u64 words).
pub const Info = extern struct {
    size: u64,
    /// Offsets, lengths and memory of direct reads are multiples of this
    /// (1 when buffered).
    alignment: u64,
    flags: u64,
    reason: u64,
};

/// What `createStage` reports (cf_stage_create's `out`, four u64 words).
pub const StageInfo = extern struct {
    /// Usable bytes per slot: the requested size rounded up to the
    /// alignment (and to a whole page).
    slot_bytes: u64,
    n_slots: u64,
    alignment: u64,
    flags: u64,
};

/// A slot handed out by `acquire`.
pub const Slot = struct {
    index: u32,
    /// Where the byte at `file_offset` is (or will be, once `wait` returns).
    data: [*]const u8,
    length: usize,
    /// True when (layer, expert) was cached (read done or in flight).
    hit: bool,
};

/// Errors of the Zig-side API; `statusOf` turns them into `abi.Status`
/// codes. `Io` is a failed system call: `readStatus` gives its errno status.
pub const Error = error{ InvalidArg, Length, Alignment, Overflow, Range, Handle, NoMemory, Busy, Limit, Changed, Io };

pub fn statusOf(e: Error) i32 {
    return switch (e) {
        error.InvalidArg => abi.Status.invalid_arg.code(),
        error.Length => abi.Status.length.code(),
        error.Alignment => abi.Status.alignment.code(),
        error.Overflow => abi.Status.overflow.code(),
        error.Range => abi.Status.range.code(),
        error.Handle => abi.Status.handle.code(),
        error.NoMemory => abi.Status.no_memory.code(),
        error.Busy => abi.Status.busy.code(),
        error.Limit => abi.Status.limit.code(),
        error.Changed => abi.Status.changed.code(),
        error.Io => abi.io_base - 5, // EIO; readStatus has the exact errno
    };
}

pub fn errorOf(status: i32) Error {
    assert(status < 0);
    if (status <= abi.io_base) return error.Io;
    return switch (@as(abi.Status, @enumFromInt(status))) {
        .invalid_arg => error.InvalidArg,
        .length => error.Length,
        .alignment => error.Alignment,
        .overflow => error.Overflow,
        .range => error.Range,
        .handle => error.Handle,
        .no_memory => error.NoMemory,
        .busy => error.Busy,
        .limit => error.Limit,
        .changed => error.Changed,
        else => error.Io,
    };
}

pub fn errno() i32 {
    const e = c._errno().*;
    return if (e > 0 and e < 4096) e else 5; // EIO when errno is not usable
}

// ---------------------------------------------------------------------------
// Alignment arithmetic
// ---------------------------------------------------------------------------

/// The aligned superset of [offset, offset + len) that a direct read covers.
pub const Span = struct {
    /// Aligned file offset where the read starts.
    start: u64,
    /// Aligned length read.
    len: usize,
    /// Where `offset` lies in it.
    data_offset: usize,
    /// Bytes from `start` that must be read (through offset + len).
    need: usize,
};

pub fn alignedSpan(offset: u64, len: usize, alignment: usize) Error!Span {
    assert(std.math.isPowerOfTwo(alignment));
    if (len == 0) return error.InvalidArg;
    const end = std.math.add(u64, offset, len) catch return error.Overflow;
    const a: u64 = alignment;
    const start = std.mem.alignBackward(u64, offset, a);
    const aligned_end = std.math.add(u64, end, a - 1) catch return error.Overflow;
    const stop = std.mem.alignBackward(u64, aligned_end, a);
    const span_len = std.math.cast(usize, stop - start) orelse return error.Overflow;
    const span = Span{ .start = start, .len = span_len, .data_offset = @intCast(offset - start), .need = @intCast(end - start) };
    assert(span.start % a == 0 and span.len % alignment == 0);
    assert(span.data_offset < alignment and span.need <= span.len and span.len - span.need < alignment);
    return span;
}

/// Chunk length for a read of `len` aligned bytes: at most `max_chunks`
/// chunks, each a multiple of the alignment and at least `min_chunk_bytes`.
pub fn chunkBytes(len: usize, alignment: usize) usize {
    assert(len > 0 and len % alignment == 0);
    const even = std.math.divCeil(usize, len, max_chunks) catch unreachable;
    const chunk = std.mem.alignForward(usize, @max(even, min_chunk_bytes), alignment);
    assert(chunk % alignment == 0 and chunk > 0);
    assert((std.math.divCeil(usize, len, chunk) catch unreachable) <= max_chunks);
    return chunk;
}

// ---------------------------------------------------------------------------
// Requests and the reader pool (io_readers.zig)
// ---------------------------------------------------------------------------

const io_readers = @import("io_readers.zig");
pub const State = io_readers.State;
pub const Request = io_readers.Request;

/// Stops the reader threads (cf_shutdown, library unload). Reads already
/// queued complete first.
pub const shutdown = io_readers.shutdown;

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

pub const File = struct {
    kind: enum(u8) { free, open } = .free,
    generation: u32 = 0,
    fd: c.fd_t = -1,
    direct: bool = false,
    alignment: usize = 1,
    size: i64 = 0,
    mtime_sec: i64 = 0,
    mtime_nsec: i64 = 0,
    /// Live stages reading this file: it is not closed while any are.
    stages: u32 = 0,
};

/// Stage slots and handles. Guards the two tables and `total_slots`; the
/// reader threads never take it.
pub var lock: std.Thread.Mutex = .{};
var files: [common.max_regions]File = [_]File{.{}} ** common.max_regions;
pub const file_table = common.Table(File, &files);

/// statx's layout through the direct-I/O alignment fields (Linux 6.1+).
const StatxDio = extern struct {
    mask: u32,
    blksize: u32,
    attributes: u64,
    nlink: u32,
    uid: u32,
    gid: u32,
    mode: u16,
    pad1: u16,
    ino: u64,
    size: u64,
    blocks: u64,
    attributes_mask: u64,
    times: [4][16]u8,
    rdev_major: u32,
    rdev_minor: u32,
    dev_major: u32,
    dev_minor: u32,
    mnt_id: u64,
    dio_mem_align: u32,
    dio_offset_align: u32,
    spare: [12]u64,
};

comptime {
    assert(@sizeOf(StatxDio) == 256);
    assert(@offsetOf(StatxDio, "dio_mem_align") == 0x98);
}

const statx_basic_stats: u32 = 0x7ff;
const statx_dioalign: u32 = 0x2000;

const Dio = union(enum) {
    /// The filesystem needs this alignment (offsets, lengths and memory).
    aligned: usize,
    /// It reports that it cannot do direct I/O.
    none,
    /// The kernel does not report it (before Linux 6.1).
    unknown,
};

/// True when the running kernel knows STATX_DIOALIGN (Linux 6.1+): there,
/// a filesystem that does not fill it cannot do direct I/O usefully.
fn kernelReportsDio() bool {
    const uts = std.posix.uname();
    const version = std.mem.sliceTo(&uts.release, 0);
    var it = std.mem.tokenizeAny(u8, version, ".-");
    const major = std.fmt.parseInt(u32, it.next() orelse return false, 10) catch return false;
    const minor = std.fmt.parseInt(u32, it.next() orelse return false, 10) catch return false;
    return major > 6 or (major == 6 and minor >= 1);
}

fn dioAlignment(fd: c.fd_t) Dio {
    var sx: StatxDio = std.mem.zeroes(StatxDio);
    const rc = linux.syscall5(.statx, @as(usize, @bitCast(@as(isize, fd))), @intFromPtr(""), linux.AT.EMPTY_PATH, statx_basic_stats | statx_dioalign, @intFromPtr(&sx));
    if (linux.E.init(rc) != .SUCCESS) return .unknown;
    if (sx.mask & statx_dioalign == 0) return if (kernelReportsDio()) .none else .unknown;
    if (sx.dio_offset_align == 0 or sx.dio_mem_align == 0) return .none;
    const a: usize = @max(sx.dio_mem_align, sx.dio_offset_align, 1);
    if (!std.math.isPowerOfTwo(a)) return .unknown;
    return .{ .aligned = a };
}

/// The logical block size stand-in where statx does not say: st_blksize,
/// at least 512, 4096 when it is not a usable power of two.
pub fn fallbackAlignment(blksize: i64) usize {
    if (blksize <= 0 or blksize > max_alignment) return 4096;
    const b: usize = @intCast(blksize);
    if (!std.math.isPowerOfTwo(b)) return 4096;
    return @max(b, 512);
}

/// Opens a regular file for reads by stages. Returns a handle (> 0) or a
/// status code; `out` gets its size, alignment and whether reads are direct.
pub fn openFile(path: []const u8, out: *Info) i32 {
    if (path.len == 0 or path.len > max_path_bytes) return abi.Status.invalid_arg.code();
    if (std.mem.indexOfScalar(u8, path, 0) != null) return abi.Status.invalid_arg.code();
    var zbuf: [max_path_bytes + 1]u8 = undefined;
    @memcpy(zbuf[0..path.len], path);
    zbuf[path.len] = 0;
    const zpath: [*:0]const u8 = zbuf[0..path.len :0];

    var reason: Reason = .none;
    var fd = c.open(zpath, .{ .ACCMODE = .RDONLY, .CLOEXEC = true, .DIRECT = true });
    if (fd < 0) {
        const e = errno();
        if (e != @intFromEnum(std.posix.E.INVAL)) return abi.ioStatus(e);
        fd = c.open(zpath, .{ .ACCMODE = .RDONLY, .CLOEXEC = true });
        if (fd < 0) return abi.ioStatus(errno());
        reason = .refused;
    }
    var keep_fd = false;
    defer if (!keep_fd) {
        _ = c.close(fd);
    };
    var st: c.Stat = undefined;
    if (c.fstat(fd, &st) != 0) return abi.ioStatus(errno());
    if (!std.posix.S.ISREG(st.mode)) return abi.ioStatus(@intFromEnum(std.posix.E.INVAL));
    if (st.size < 0) return abi.Status.range.code();

    var alignment: usize = 1;
    if (reason == .none) {
        switch (dioAlignment(fd)) {
            .aligned => |a| alignment = a,
            .none => reason = .no_dio_align,
            .unknown => alignment = fallbackAlignment(st.blksize),
        }
        if (reason == .none and alignment > max_alignment) reason = .alignment_too_large;
        if (reason != .none) {
            // Keep the descriptor, drop O_DIRECT from it.
            alignment = 1;
            const get = linux.fcntl(fd, linux.F.GETFL, 0);
            if (linux.E.init(get) != .SUCCESS) return abi.ioStatus(@intCast(@intFromEnum(linux.E.init(get))));
            const direct_bit: usize = @as(u32, @bitCast(linux.O{ .DIRECT = true }));
            const set = linux.fcntl(fd, linux.F.SETFL, get & ~direct_bit);
            if (linux.E.init(set) != .SUCCESS) return abi.ioStatus(@intCast(@intFromEnum(linux.E.init(set))));
        }
    }
    const direct = reason == .none;
    assert(std.math.isPowerOfTwo(alignment) and alignment <= max_alignment);
    assert(direct or alignment == 1);

    lock.lock();
    defer lock.unlock();
    const index = file_table.claim() orelse return abi.Status.limit.code();
    const f = &files[index];
    const generation = file_table.nextGeneration(f);
    const mtime = st.mtime();
    f.* = .{
        .kind = .open,
        .generation = generation,
        .fd = fd,
        .direct = direct,
        .alignment = alignment,
        .size = st.size,
        .mtime_sec = mtime.sec,
        .mtime_nsec = mtime.nsec,
    };
    keep_fd = true;
    out.* = .{
        .size = @intCast(st.size),
        .alignment = alignment,
        .flags = if (direct) flag_direct else 0,
        .reason = @intFromEnum(reason),
    };
    return file_table.handleOf(index, generation);
}

/// Closes a file. `busy` while a stage still reads it (destroy the stages
/// first: destroying one drains its reads, so a closed file has none).
pub fn closeFile(handle: i32) i32 {
    lock.lock();
    defer lock.unlock();
    const f = file_table.lookup(handle, .open) orelse return abi.Status.handle.code();
    if (f.stages > 0) return abi.Status.busy.code();
    assert(f.fd >= 0);
    _ = c.close(f.fd);
    const generation = f.generation;
    f.* = .{ .generation = generation };
    return abi.Status.ok.code();
}

// ---------------------------------------------------------------------------
// Stages (io_stage.zig)
// ---------------------------------------------------------------------------

const io_stage = @import("io_stage.zig");
pub const createStage = io_stage.createStage;
pub const destroyStage = io_stage.destroyStage;
pub const acquire = io_stage.acquire;
pub const readStatus = io_stage.readStatus;
pub const wait = io_stage.wait;
pub const release = io_stage.release;
pub const releaseChecked = io_stage.releaseChecked;
pub const copyOut = io_stage.copyOut;
pub const stats = io_stage.stats;
pub const resetStats = io_stage.resetStats;
pub const pin = io_stage.pin;
pub const unpin = io_stage.unpin;

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;

test "aligned spans and chunks" {
    const s = try alignedSpan(1000, 100, 512);
    try testing.expectEqual(@as(u64, 512), s.start);
    try testing.expectEqual(@as(usize, 1024), s.len);
    try testing.expectEqual(@as(usize, 488), s.data_offset);
    try testing.expectEqual(@as(usize, 588), s.need);
    const exact = try alignedSpan(4096, 4096, 4096);
    try testing.expectEqual(Span{ .start = 4096, .len = 4096, .data_offset = 0, .need = 4096 }, exact);
    const one = try alignedSpan(7, 1, 1);
    try testing.expectEqual(Span{ .start = 7, .len = 1, .data_offset = 0, .need = 1 }, one);
    try testing.expectError(error.InvalidArg, alignedSpan(0, 0, 512));
    try testing.expectError(error.Overflow, alignedSpan(std.math.maxInt(u64) - 10, 20, 512));
    try testing.expectError(error.Overflow, alignedSpan(std.math.maxInt(u64) - 100, 20, 512));
    var prng = std.Random.DefaultPrng.init(1);
    const rand = prng.random();
    for (0..10_000) |_| {
        const a = @as(usize, 1) << rand.intRangeAtMost(u6, 0, 16);
        const off = rand.intRangeAtMost(u64, 0, 1 << 40);
        const len = rand.intRangeAtMost(usize, 1, 1 << 26);
        const sp = try alignedSpan(off, len, a);
        try testing.expect(sp.start <= off and sp.start + sp.need == off + len);
        const chunk = chunkBytes(sp.len, a);
        try testing.expect(chunk >= @min(sp.len, min_chunk_bytes) or chunk % a == 0);
        try testing.expect(try std.math.divCeil(usize, sp.len, chunk) <= max_chunks);
    }
    try testing.expectEqual(min_chunk_bytes, chunkBytes(4096, 4096));
    try testing.expectEqual(@as(usize, 1 << 20), chunkBytes(8 << 20, 4096));
    try testing.expectEqual(@as(usize, 4096), fallbackAlignment(0));
    try testing.expectEqual(@as(usize, 512), fallbackAlignment(256));
    try testing.expectEqual(@as(usize, 4096), fallbackAlignment(3000));
    try testing.expectEqual(@as(usize, 65536), fallbackAlignment(65536));
}

test "queue bound: every slot's request fits at once" {
    comptime assert(queue_capacity >= @as(usize, max_total_slots) * max_chunks);
    try testing.expect(chunkBytes(max_slot_bytes, 4096) * max_chunks >= max_slot_bytes);
}

test "open refuses what is not a regular file" {
    var info: Info = undefined;
    try testing.expectEqual(abi.ioStatus(2), openFile("/nonexistent/cflow/x", &info));
    try testing.expectEqual(abi.Status.invalid_arg.code(), openFile("a\x00b", &info));
    try testing.expectEqual(abi.Status.invalid_arg.code(), openFile("", &info));
    try testing.expect(openFile("/proc", &info) < 0);
    try testing.expectEqual(abi.Status.handle.code(), closeFile(0));
    var si: StageInfo = undefined;
    try testing.expectEqual(abi.Status.handle.code(), createStage(12345, 4096, 1, &si));
}
