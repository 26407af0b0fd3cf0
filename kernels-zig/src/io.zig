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
const Atomic = std.atomic.Value;
const Futex = std.Thread.Futex;

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

fn errorOf(status: i32) Error {
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

fn errno() i32 {
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
const block = io_readers.block;

/// Stops the reader threads (cf_shutdown, library unload). Reads already
/// queued complete first.
pub const shutdown = io_readers.shutdown;

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

const File = struct {
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
var lock: std.Thread.Mutex = .{};
var files: [common.max_regions]File = [_]File{.{}} ** common.max_regions;
const file_table = common.Table(File, &files);

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
// Stages
// ---------------------------------------------------------------------------

const SlotMeta = struct {
    keyed: bool = false,
    layer: u32 = 0,
    expert: u32 = 0,
    file_offset: u64 = 0,
    length: usize = 0,
    data_offset: usize = 0,
    pins: u32 = 0,
    last_use: u64 = 0,
    request: Request = .{},

    fn state(m: *const SlotMeta) State {
        return m.request.loadState();
    }
};

const Stage = struct {
    kind: enum(u8) { free, live } = .free,
    generation: u32 = 0,
    file: i32 = 0,
    direct: bool = false,
    alignment: usize = 1,
    /// The allocation: `mapped_len` bytes from `map_base`; slots from `base`.
    map_base: usize = 0,
    mapped_len: usize = 0,
    base: usize = 0,
    slot_bytes: usize = 0,
    slots: []SlotMeta = &.{},
    clock: u64 = 0,
    /// Plans holding the stage.
    pins: u32 = 0,
    hits: u64 = 0,
    misses: u64 = 0,
    bytes_read: Atomic(u64) = .init(0),
    stall_ns: Atomic(u64) = .init(0),
    /// Requests of this stage not finished; destroy waits for zero.
    inflight: Atomic(u32) = .init(0),
};

var stages: [common.max_regions]Stage = [_]Stage{.{}} ** common.max_regions;
const stage_table = common.Table(Stage, &stages);
var total_slots: u32 = 0;

/// Creates a stage of `n_slots` slots of at least `slot_bytes` bytes for
/// reads of file `file`. Returns a handle (> 0) or a status code.
pub fn createStage(file: i32, slot_bytes: usize, n_slots: u32, out: *StageInfo) i32 {
    if (slot_bytes == 0 or slot_bytes > max_slot_bytes) return abi.Status.invalid_arg.code();
    if (n_slots == 0 or n_slots > max_slots_per_stage) return abi.Status.invalid_arg.code();
    lock.lock();
    defer lock.unlock();
    const f = file_table.lookup(file, .open) orelse return abi.Status.handle.code();
    const page = std.heap.pageSize();
    const stride_align = @max(f.alignment, page);
    const stride = std.mem.alignForward(usize, slot_bytes, stride_align);
    const size = std.math.mul(usize, stride, n_slots) catch return abi.Status.overflow.code();
    if (size > max_stage_bytes) return abi.Status.limit.code();
    if (total_slots + n_slots > max_total_slots) return abi.Status.limit.code();
    const index = stage_table.claim() orelse return abi.Status.limit.code();

    const meta = std.heap.page_allocator.alloc(SlotMeta, n_slots) catch return abi.Status.no_memory.code();
    var keep_meta = false;
    defer if (!keep_meta) std.heap.page_allocator.free(meta);
    for (meta) |*m| m.* = .{};

    const extra = if (f.alignment > page) f.alignment else 0;
    const total = size + extra;
    const p = c.mmap(null, total, c.PROT.READ | c.PROT.WRITE, .{ .TYPE = .PRIVATE, .ANONYMOUS = true }, -1, 0);
    if (p == c.MAP_FAILED) return if (errno() == 12) abi.Status.no_memory.code() else abi.ioStatus(errno());
    const map_base = @intFromPtr(p);
    const base = std.mem.alignForward(usize, map_base, f.alignment);
    assert(base + size <= map_base + total);
    assert(base % f.alignment == 0 and stride % f.alignment == 0);

    const s = &stages[index];
    const generation = stage_table.nextGeneration(s);
    s.* = .{
        .kind = .live,
        .generation = generation,
        .file = file,
        .direct = f.direct,
        .alignment = f.alignment,
        .map_base = map_base,
        .mapped_len = total,
        .base = base,
        .slot_bytes = stride,
        .slots = meta,
    };
    keep_meta = true;
    f.stages += 1;
    total_slots += n_slots;
    out.* = .{ .slot_bytes = stride, .n_slots = n_slots, .alignment = f.alignment, .flags = if (f.direct) flag_direct else 0 };
    return stage_table.handleOf(index, generation);
}

/// Destroys a stage: `busy` while a plan pins it or a slot is pinned;
/// otherwise waits for every read in flight, then frees the slots.
pub fn destroyStage(handle: i32) i32 {
    lock.lock();
    defer lock.unlock();
    const s = stage_table.lookup(handle, .live) orelse return abi.Status.handle.code();
    if (s.pins > 0) return abi.Status.busy.code();
    for (s.slots) |*m| if (m.pins > 0) return abi.Status.busy.code();
    drain(s);
    const f = file_table.lookup(s.file, .open) orelse unreachable; // closing refuses while stages live
    assert(f.stages > 0);
    f.stages -= 1;
    assert(total_slots >= s.slots.len);
    total_slots -= @intCast(s.slots.len);
    _ = c.munmap(@ptrFromInt(s.map_base), s.mapped_len);
    std.heap.page_allocator.free(s.slots);
    const generation = s.generation;
    s.* = .{ .generation = generation };
    return abi.Status.ok.code();
}

/// Waits (holding `lock`: no new read can start) until no read of `s` is in
/// flight. Readers never take `lock`.
fn drain(s: *Stage) void {
    while (true) {
        const n = s.inflight.load(.acquire);
        if (n == 0) break;
        Futex.wait(&s.inflight, n);
    }
    for (s.slots) |*m| assert(m.state() != .pending);
}

fn liveStage(handle: i32) Error!*Stage {
    return stage_table.lookup(handle, .live) orelse error.Handle;
}

fn slotData(s: *const Stage, index: usize) [*]u8 {
    assert(index < s.slots.len);
    return @ptrFromInt(s.base + index * s.slot_bytes);
}

/// Pins `(layer, expert)` in a slot of `stage`, reading
/// [file_offset, file_offset + length) of the stage's file into it unless it
/// is cached (read done or in flight). On a miss the least-recently-used
/// slot that is neither pinned nor being read is taken. `out.data` is where
/// the byte at file_offset is once `wait` returns. Every acquire is paired
/// with one `release`. Errors: Handle, InvalidArg (zero length, or a cached
/// key with another range), Range (past the file's end), Length (the
/// aligned range exceeds slot_bytes), Limit (every slot pinned or being
/// read), Busy/NoMemory (the readers cannot run).
pub fn acquire(stage: i32, layer: u32, expert: u32, file_offset: u64, length: usize, out: *Slot) Error!void {
    lock.lock();
    defer lock.unlock();
    const s = try liveStage(stage);
    const f = file_table.lookup(s.file, .open) orelse unreachable;
    const span = try alignedSpan(file_offset, length, s.alignment);
    if (file_offset + length > @as(u64, @intCast(f.size))) return error.Range;
    if (span.len > s.slot_bytes) return error.Length;
    s.clock += 1;

    var victim: ?usize = null;
    for (s.slots, 0..) |*m, i| {
        if (m.keyed and m.layer == layer and m.expert == expert) {
            if (m.file_offset != file_offset or m.length != length) return error.InvalidArg;
            if (m.state() == .failed and m.pins == 0) {
                victim = i; // a failed read nobody waits for: read again
                break;
            }
            m.pins += 1;
            m.last_use = s.clock;
            s.hits += 1;
            out.* = .{ .index = @intCast(i), .data = slotData(s, i) + m.data_offset, .length = length, .hit = true };
            return;
        }
    }
    if (victim == null) victim = lruVictim(s.slots);
    const i = victim orelse return error.Limit;
    const m = &s.slots[i];
    assert(m.pins == 0 and m.state() != .pending);
    m.keyed = true;
    m.layer = layer;
    m.expert = expert;
    m.file_offset = file_offset;
    m.length = length;
    m.data_offset = span.data_offset;
    m.last_use = s.clock;
    m.pins = 1;
    errdefer {
        m.keyed = false;
        m.pins = 0;
    }
    const r = &m.request;
    const chunk = chunkBytes(span.len, s.alignment);
    r.fd = f.fd;
    r.direct = s.direct;
    r.alignment = s.alignment;
    r.dst = slotData(s, i);
    r.start = span.start;
    r.len = span.len;
    r.need = span.need;
    r.chunk = chunk;
    r.n_chunks = @intCast(std.math.divCeil(usize, span.len, chunk) catch unreachable);
    r.file_size = f.size;
    r.mtime_sec = f.mtime_sec;
    r.mtime_nsec = f.mtime_nsec;
    r.bytes = &s.bytes_read;
    r.inflight = &s.inflight;
    r.status.store(0, .monotonic);
    r.remaining.store(r.n_chunks, .monotonic);
    r.state.store(@intFromEnum(State.pending), .release);
    _ = s.inflight.fetchAdd(1, .acq_rel);
    io_readers.submit(r) catch |e| {
        r.state.store(@intFromEnum(State.idle), .release);
        _ = s.inflight.fetchSub(1, .acq_rel);
        return e;
    };
    s.misses += 1;
    out.* = .{ .index = @intCast(i), .data = slotData(s, i) + span.data_offset, .length = length, .hit = false };
}

/// The slot to reuse: unpinned and not being read; an empty one first,
/// else the least recently used. Null when there is none.
fn lruVictim(slots: []const SlotMeta) ?usize {
    var best: ?usize = null;
    for (slots, 0..) |*m, i| {
        if (m.pins > 0 or m.state() == .pending) continue;
        if (!m.keyed) return i;
        if (best == null or m.last_use < slots[best.?].last_use) best = i;
    }
    return best;
}

/// Blocks until the read into a slot the caller pinned is complete; returns
/// 0 or the read's status code (an errno status for I/O errors). A failed
/// slot is unkeyed, so that the next acquire reads it again. The time spent
/// blocked is added to the stage's stall counter.
pub fn readStatus(stage: i32, slot: u32) i32 {
    const r = pinnedRequest(stage, slot) catch |e| return statusOf(e);
    // Pinned: the stage cannot be destroyed nor the slot reused meanwhile.
    const ns = block(r);
    const status = switch (r.loadState()) {
        .done => abi.Status.ok.code(),
        .failed => r.status.load(.acquire),
        .idle, .pending => unreachable,
    };
    lock.lock();
    defer lock.unlock();
    const s = stage_table.lookup(stage, .live) orelse unreachable;
    _ = s.stall_ns.fetchAdd(ns, .monotonic);
    if (status != 0) s.slots[slot].keyed = false;
    return status;
}

fn pinnedRequest(stage: i32, slot: u32) Error!*Request {
    lock.lock();
    defer lock.unlock();
    const s = try liveStage(stage);
    if (slot >= s.slots.len) return error.Range;
    const m = &s.slots[slot];
    // Not `keyed`: a failed read unkeys its slot, and a second holder of
    // the same pin still waits for (and gets) the failure.
    if (m.pins == 0 or m.state() == .idle) return error.InvalidArg;
    return &m.request;
}

/// `readStatus` as an error: Io for an I/O failure (its errno is the
/// `readStatus` of the same failure, before the slot is reused).
pub fn wait(stage: i32, slot: u32) Error!void {
    const status = readStatus(stage, slot);
    if (status != 0) return errorOf(status);
}

/// Undoes one `acquire` of a slot (the slot must be pinned).
pub fn release(stage: i32, slot: u32) void {
    const rc = releaseChecked(stage, slot);
    assert(rc == 0);
}

/// `release` for callers that may pass anything: a status code.
pub fn releaseChecked(stage: i32, slot: u32) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    if (slot >= s.slots.len) return abi.Status.range.code();
    const m = &s.slots[slot];
    if (m.pins == 0) return abi.Status.invalid_arg.code();
    m.pins -= 1;
    return abi.Status.ok.code();
}

/// Copies [offset, offset + dst.len) of the expert held by a pinned slot
/// whose read is done (offsets relative to the acquired file_offset).
pub fn copyOut(stage: i32, slot: u32, offset: usize, dst: []u8) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    if (slot >= s.slots.len) return abi.Status.range.code();
    const m = &s.slots[slot];
    if (m.pins == 0) return abi.Status.invalid_arg.code();
    switch (m.state()) {
        .done => {},
        .failed => return m.request.status.load(.acquire),
        .pending => return abi.Status.busy.code(),
        .idle => return abi.Status.invalid_arg.code(),
    }
    const end = std.math.add(usize, offset, dst.len) catch return abi.Status.overflow.code();
    if (end > m.length) return abi.Status.range.code();
    assert(m.data_offset + m.length <= s.slot_bytes);
    if (dst.len == 0) return abi.Status.ok.code();
    const src = slotData(s, slot) + m.data_offset;
    @memcpy(dst, src[offset..end]);
    return abi.Status.ok.code();
}

/// hits, misses, bytes read, nanoseconds blocked in `wait`.
pub fn stats(stage: i32, out: *[4]u64) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    out.* = .{ s.hits, s.misses, s.bytes_read.load(.monotonic), s.stall_ns.load(.monotonic) };
    return abi.Status.ok.code();
}

pub fn resetStats(stage: i32) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    s.hits = 0;
    s.misses = 0;
    s.bytes_read.store(0, .monotonic);
    s.stall_ns.store(0, .monotonic);
    return abi.Status.ok.code();
}

/// Pins a stage for a plan (it cannot be destroyed until `unpin`); `out`
/// gets its geometry.
pub fn pin(stage: i32, out: *StageInfo) Error!void {
    lock.lock();
    defer lock.unlock();
    const s = try liveStage(stage);
    s.pins += 1;
    out.* = .{ .slot_bytes = s.slot_bytes, .n_slots = s.slots.len, .alignment = s.alignment, .flags = if (s.direct) flag_direct else 0 };
}

/// Undoes one `pin`.
pub fn unpin(stage: i32) void {
    lock.lock();
    defer lock.unlock();
    const s = stage_table.lookup(stage, .live) orelse unreachable;
    assert(s.pins > 0);
    s.pins -= 1;
}

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

test "least recently used victim: empty first, never pinned or in flight" {
    var slots = [_]SlotMeta{ .{}, .{}, .{}, .{} };
    for (&slots, 0..) |*m, i| {
        m.keyed = true;
        m.last_use = 10 - i;
        m.request.state.store(@intFromEnum(State.done), .monotonic);
    }
    try testing.expectEqual(@as(?usize, 3), lruVictim(&slots));
    slots[3].pins = 1;
    try testing.expectEqual(@as(?usize, 2), lruVictim(&slots));
    slots[2].request.state.store(@intFromEnum(State.pending), .monotonic);
    try testing.expectEqual(@as(?usize, 1), lruVictim(&slots));
    slots[0].keyed = false;
    try testing.expectEqual(@as(?usize, 0), lruVictim(&slots));
    slots[0].pins = 2;
    slots[1].pins = 1;
    try testing.expectEqual(@as(?usize, null), lruVictim(&slots));
    slots[2].request.state.store(@intFromEnum(State.failed), .monotonic);
    try testing.expectEqual(@as(?usize, 2), lruVictim(&slots));
}

test "queue bound: every slot's request fits at once" {
    comptime assert(queue_capacity >= @as(usize, max_total_slots) * max_chunks);
    try testing.expect(chunkBytes(max_slot_bytes, 4096) * max_chunks >= max_slot_bytes);
}

fn tmpPath(tmp: *testing.TmpDir, name: []const u8, buf: *[std.fs.max_path_bytes]u8) ![]const u8 {
    return tmp.dir.realpath(name, buf);
}

test "stage: reads, hits, misses, eviction, pins and limits on a real file" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    var data: [300_000]u8 = undefined;
    var prng = std.Random.DefaultPrng.init(7);
    prng.random().bytes(&data);
    try tmp.dir.writeFile(.{ .sub_path = "e.bin", .data = &data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmpPath(&tmp, "e.bin", &path_buf);

    var info: Info = undefined;
    const fh = openFile(path, &info);
    try testing.expect(fh > 0);
    defer _ = closeFile(fh);
    try testing.expectEqual(@as(u64, data.len), info.size);
    try testing.expect(std.math.isPowerOfTwo(info.alignment));
    if (info.flags & flag_direct == 0) try testing.expectEqual(@as(u64, 1), info.alignment);

    var si: StageInfo = undefined;
    const sh = createStage(fh, 70_000, 3, &si);
    try testing.expect(sh > 0);
    try testing.expectEqual(abi.Status.busy.code(), closeFile(fh));
    try testing.expect(si.slot_bytes >= 70_000 and si.slot_bytes % info.alignment == 0);

    var slot: Slot = undefined;
    const ranges = [_][2]usize{ .{ 1, 60_000 }, .{ 100_001, 33 }, .{ 299_000, 1000 } };
    for (ranges, 0..) |rg, k| {
        try acquire(sh, 0, @intCast(k), rg[0], rg[1], &slot);
        try testing.expect(!slot.hit);
        try wait(sh, slot.index);
        try testing.expectEqualSlices(u8, data[rg[0]..][0..rg[1]], slot.data[0..rg[1]]);
        var part: [16]u8 = undefined;
        try testing.expectEqual(@as(i32, 0), copyOut(sh, slot.index, rg[1] - 16, &part));
        try testing.expectEqualSlices(u8, data[rg[0] + rg[1] - 16 ..][0..16], &part);
        try testing.expectEqual(abi.Status.range.code(), copyOut(sh, slot.index, rg[1] - 15, &part));
    }
    // Every slot pinned: a fourth key is refused, not waited for.
    try testing.expectError(error.Limit, acquire(sh, 0, 9, 0, 10, &slot));
    try testing.expectEqual(abi.Status.busy.code(), destroyStage(sh));
    // A hit pins again; two releases for two acquires.
    try acquire(sh, 0, 1, 100_001, 33, &slot);
    try testing.expect(slot.hit);
    try testing.expectError(error.InvalidArg, acquire(sh, 0, 1, 100_000, 33, &slot));
    for (0..3) |i| release(sh, @intCast(i));
    release(sh, 1);
    try testing.expectEqual(abi.Status.invalid_arg.code(), releaseChecked(sh, 1));
    // LRU: key 0 was used least recently (key 1 was hit last, key 2 read after 0).
    try acquire(sh, 0, 9, 0, 10, &slot);
    try testing.expectEqual(@as(u32, 0), slot.index);
    try wait(sh, slot.index);
    release(sh, slot.index);
    try acquire(sh, 0, 0, 1, 60_000, &slot); // evicted: read again, into the next LRU (key 2's)
    try testing.expect(!slot.hit);
    try testing.expectEqual(@as(u32, 2), slot.index);
    try wait(sh, slot.index);
    try testing.expectEqualSlices(u8, data[1..60_001], slot.data[0..60_000]);
    release(sh, slot.index);
    // Errors that never start a read.
    try testing.expectError(error.Range, acquire(sh, 0, 5, data.len - 5, 6, &slot));
    try testing.expectError(error.Length, acquire(sh, 0, 5, 0, si.slot_bytes + 1, &slot));
    try testing.expectError(error.InvalidArg, acquire(sh, 0, 5, 0, 0, &slot));
    try testing.expectError(error.InvalidArg, wait(sh, 0)); // not pinned
    try testing.expectError(error.Range, wait(sh, 3));
    var st: [4]u64 = undefined;
    try testing.expectEqual(@as(i32, 0), stats(sh, &st));
    try testing.expectEqual(@as(u64, 1), st[0]);
    try testing.expectEqual(@as(u64, 5), st[1]);
    try testing.expect(st[2] >= 60_000 + 33 + 1000 + 10 + 60_000);
    try testing.expectEqual(@as(i32, 0), resetStats(sh));
    try testing.expectEqual(@as(i32, 0), stats(sh, &st));
    try testing.expectEqual([4]u64{ 0, 0, 0, 0 }, st);
    // Plans pin the stage itself.
    var pi: StageInfo = undefined;
    try pin(sh, &pi);
    try testing.expectEqual(abi.Status.busy.code(), destroyStage(sh));
    unpin(sh);
    try testing.expectEqual(@as(i32, 0), destroyStage(sh));
    try testing.expectEqual(abi.Status.handle.code(), destroyStage(sh));
    try testing.expectError(error.Handle, acquire(sh, 0, 0, 0, 1, &slot));
}

test "a file truncated after open fails the read, and the slot is reused" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    const data = [_]u8{0x5a} ** 65536;
    try tmp.dir.writeFile(.{ .sub_path = "t.bin", .data = &data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmpPath(&tmp, "t.bin", &path_buf);
    var info: Info = undefined;
    const fh = openFile(path, &info);
    try testing.expect(fh > 0);
    defer _ = closeFile(fh);
    var si: StageInfo = undefined;
    const sh = createStage(fh, 65536, 1, &si);
    try testing.expect(sh > 0);
    defer _ = destroyStage(sh);
    const f = try tmp.dir.openFile("t.bin", .{ .mode = .read_write });
    try f.setEndPos(1000);
    f.close();
    var slot: Slot = undefined;
    try acquire(sh, 1, 2, 4096, 8192, &slot);
    var twice: Slot = undefined;
    try acquire(sh, 1, 2, 4096, 8192, &twice); // a second holder of the same read
    try testing.expect(twice.hit and twice.index == slot.index);
    try testing.expectEqual(abi.Status.changed.code(), readStatus(sh, slot.index));
    try testing.expectEqual(abi.Status.changed.code(), readStatus(sh, twice.index));
    var byte: [1]u8 = undefined;
    try testing.expectEqual(abi.Status.changed.code(), copyOut(sh, slot.index, 0, &byte));
    release(sh, twice.index);
    release(sh, slot.index);
    // Unkeyed after the failure: the same key is a miss again, same slot.
    try acquire(sh, 1, 2, 4096, 8192, &slot);
    try testing.expect(!slot.hit);
    try testing.expectError(error.Changed, wait(sh, slot.index));
    release(sh, slot.index);
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

test "many reads in flight at once, then shutdown and restart" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    var data: [1 << 20]u8 = undefined;
    var prng = std.Random.DefaultPrng.init(11);
    prng.random().bytes(&data);
    try tmp.dir.writeFile(.{ .sub_path = "m.bin", .data = &data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmpPath(&tmp, "m.bin", &path_buf);
    var info: Info = undefined;
    const fh = openFile(path, &info);
    try testing.expect(fh > 0);
    defer _ = closeFile(fh);
    var si: StageInfo = undefined;
    const sh = createStage(fh, 600_000, 32, &si);
    try testing.expect(sh > 0);
    for (0..2) |round| {
        var slots: [32]Slot = undefined;
        for (&slots, 0..) |*sl, k| {
            const off = (k * 31_337 + round * 7) % (data.len - 600_000);
            try acquire(sh, @intCast(round), @intCast(k), off, 500_000 + k, sl);
        }
        for (&slots, 0..) |*sl, k| {
            const off = (k * 31_337 + round * 7) % (data.len - 600_000);
            try wait(sh, sl.index);
            try testing.expectEqualSlices(u8, data[off..][0 .. 500_000 + k], sl.data[0 .. 500_000 + k]);
            release(sh, sl.index);
        }
        shutdown(); // readers stop; the next read starts them again
    }
    // Destroying with reads in flight waits for them.
    var sl: Slot = undefined;
    for (0..8) |k| {
        try acquire(sh, 9, @intCast(k), k * 1000, 400_000, &sl);
        release(sh, sl.index);
    }
    try testing.expectEqual(@as(i32, 0), destroyStage(sh));
}
