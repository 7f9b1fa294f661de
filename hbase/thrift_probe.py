#!/usr/bin/env python3
"""Dependency-free HBase Thrift1 (and a little Thrift2) client, just enough for hbasectl.

Why hand-rolled: the readiness probe must run on a bare machine (no pip
install, no thrift package). It speaks what the Rust client speaks:
TBinaryProtocol (strict, versioned messages) over a buffered (unframed)
TCP transport, against the thread-pool Thrift1 gateway.

Usage:
  thrift_probe.py [--host H] [--port P] [--timeout S] tables
      One getTableNames() call. Exit 0 and print the names when the gateway
      answered with a real reply (which needs the master and hbase:meta up);
      exit 1 otherwise. An open port alone is not readiness: the gateway binds
      before HBase is reachable.
  thrift_probe.py [...] tables2
      The same readiness check against the Thrift2 gateway: one
      getTableNamesByPattern() call (Thrift2 has no getTableNames()).
  thrift_probe.py [...] regions
      Against the Thrift2 gateway: where every region of every table,
      hbase:meta included, is served, one "HOST:PORT TABLE REPLICA_ID" line
      per region replica (REPLICA_ID 0 is the primary). What `hbasectl status`
      counts per region server of a cluster.
  thrift_probe.py [...] smoke [TABLE]
      createTable (if missing), mutateRow, getRow, and check the value read
      back; exit 0 on success. Used to check a fresh install end to end.
  thrift_probe.py [...] get TABLE ROW
      Print the cells of one row (to check data survived a restart).
  thrift_probe.py [...] warm SECONDS [THRIFT2_PORT]
      Read every table through the gateway, 500 rows a call, for at most
      SECONDS (and, with THRIFT2_PORT, a few calls through the Thrift2
      gateway per table); print what was read. A gateway and region server
      just started answer their first thousands of calls slowly (their JVMs
      interpret the code until it is hot, and the block cache is empty);
      this takes that cost before readers arrive.
"""

import argparse
import socket
import struct
import sys
import time

# Thrift type ids (TType).
T_STOP, T_BOOL, T_BYTE, T_DOUBLE = 0, 2, 3, 4
T_I16, T_I32, T_I64, T_STRING = 6, 8, 10, 11
T_STRUCT, T_MAP, T_SET, T_LIST = 12, 13, 14, 15

VERSION_1 = 0x80010000
CALL, REPLY, EXCEPTION = 1, 2, 3


class ThriftError(Exception):
    """A Thrift-level failure: declared exception or TApplicationException."""


class Conn:
    """One blocking connection; one request at a time, like the gateway expects."""

    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rbuf = b""
        self.seqid = 0

    def close(self):
        self.sock.close()

    # ---- reading -----------------------------------------------------------
    def _read(self, n):
        while len(self.rbuf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("gateway closed the connection")
            self.rbuf += chunk
        out, self.rbuf = self.rbuf[:n], self.rbuf[n:]
        return out

    def _i8(self):
        return struct.unpack("!b", self._read(1))[0]

    def _i16(self):
        return struct.unpack("!h", self._read(2))[0]

    def _i32(self):
        return struct.unpack("!i", self._read(4))[0]

    def _i64(self):
        return struct.unpack("!q", self._read(8))[0]

    def _bin(self):
        return self._read(self._i32())

    def _value(self, ttype):
        """Decode any value generically; structs become {field_id: value}."""
        if ttype == T_BOOL:
            return self._i8() != 0
        if ttype == T_BYTE:
            return self._i8()
        if ttype == T_DOUBLE:
            return struct.unpack("!d", self._read(8))[0]
        if ttype == T_I16:
            return self._i16()
        if ttype == T_I32:
            return self._i32()
        if ttype == T_I64:
            return self._i64()
        if ttype == T_STRING:
            return self._bin()
        if ttype == T_STRUCT:
            out = {}
            while True:
                ftype = self._i8()
                if ftype == T_STOP:
                    return out
                fid = self._i16()
                out[fid] = self._value(ftype)
        if ttype == T_MAP:
            ktype, vtype, size = self._i8(), self._i8(), self._i32()
            return [(self._value(ktype), self._value(vtype)) for _ in range(size)]
        if ttype in (T_LIST, T_SET):
            etype, size = self._i8(), self._i32()
            return [self._value(etype) for _ in range(size)]
        raise ThriftError("unknown thrift type %d" % ttype)

    # ---- calling -----------------------------------------------------------
    def call(self, name, args_payload=b""):
        """Send one CALL (args struct body given pre-encoded) and decode the result struct."""
        self.seqid += 1
        bname = name.encode()
        msg = struct.pack("!I", VERSION_1 | CALL) + struct.pack("!i", len(bname)) + bname
        msg += struct.pack("!i", self.seqid) + args_payload + bytes([T_STOP])
        self.sock.sendall(msg)

        head = self._i32() & 0xFFFFFFFF
        if head & 0xFFFF0000 != VERSION_1:
            raise ThriftError("bad reply header 0x%08x (framed/compact server?)" % head)
        mtype = head & 0xFF
        rname = self._bin().decode(errors="replace")
        rseq = self._i32()
        body = self._value(T_STRUCT)
        if rseq != self.seqid or rname != name:
            raise ThriftError("out-of-step reply %s/%d for %s/%d" % (rname, rseq, name, self.seqid))
        if mtype == EXCEPTION:
            raise ThriftError("TApplicationException: %s" % body.get(1, b"").decode(errors="replace"))
        if mtype != REPLY:
            raise ThriftError("unexpected message type %d" % mtype)
        for fid, val in body.items():
            if fid != 0:  # a declared exception (IOError, IllegalArgument, AlreadyExists)
                msg = val.get(1, b"") if isinstance(val, dict) else val
                raise ThriftError("declared exception field %d: %s" % (fid, msg.decode(errors="replace")))
        return body.get(0)


# ---- encoding helpers (field header + value) ------------------------------
def f_hdr(ttype, fid):
    return struct.pack("!bh", ttype, fid)


def f_bin(fid, data):
    if isinstance(data, str):
        data = data.encode()
    return f_hdr(T_STRING, fid) + struct.pack("!i", len(data)) + data


def f_bool(fid, v):
    return f_hdr(T_BOOL, fid) + struct.pack("!b", 1 if v else 0)


def f_i32(fid, v):
    return f_hdr(T_I32, fid) + struct.pack("!i", v)


def f_list_struct(fid, items):
    """items: pre-encoded struct bodies (without T_STOP)."""
    out = f_hdr(T_LIST, fid) + struct.pack("!bi", T_STRUCT, len(items))
    return out + b"".join(i + bytes([T_STOP]) for i in items)


def f_empty_map(fid):
    return f_hdr(T_MAP, fid) + struct.pack("!bbi", T_STRING, T_STRING, 0)


def column_descriptor(name):
    # Every field explicit: the gateway rejects a default-constructed one.
    return (f_bin(1, name) + f_i32(2, 1) + f_bin(3, "NONE") + f_bool(4, False)
            + f_bin(5, "NONE") + f_i32(6, 0) + f_i32(7, 0) + f_bool(8, True)
            + f_i32(9, 2147483647))


def mutation(column, value):
    return f_bool(1, False) + f_bin(2, column) + f_bin(3, value) + f_bool(4, True)


def get_table_names(conn):
    return [n.decode(errors="replace") for n in conn.call("getTableNames") or []]


def get_table_names_thrift2(conn):
    # getTableNamesByPattern(1: regex (left out: every table), 2: includeSysTables)
    names = conn.call("getTableNamesByPattern", f_bool(2, False)) or []
    # TTableName {1: ns, 2: qualifier}
    return [n.get(2, b"").decode(errors="replace") for n in names]


def region_locations(conn):
    """(host:port, table, replica id) of every region replica, system tables
    included. Both name a server: region servers on addresses of their own
    may be given the same ephemeral port."""
    located = []
    # getTableNamesByPattern(1: regex (left out), 2: includeSysTables) -> TTableName {1: ns, 2: qualifier}
    for name in conn.call("getTableNamesByPattern", f_bool(2, True)) or []:
        namespace, qualifier = name.get(1, b"default"), name.get(2, b"")
        table = qualifier if namespace == b"default" else namespace + b":" + qualifier
        # getAllRegionLocations(1: table) -> THRegionLocation {1: TServerName {1: hostName, 2: port},
        #   2: THRegionInfo {7: replicaId}}
        locations = conn.call("getAllRegionLocations", f_bin(1, table)) or []
        if table == b"hbase:meta":
            # For meta's primary the gateway's client answers from the
            # location it cached when it last needed meta, which may be long
            # ago (it needs meta only for regions it has no location for):
            # asked to reload, it reads meta's location afresh.
            # getRegionLocation(1: table, 2: row, 3: reload) -> THRegionLocation
            primary = conn.call("getRegionLocation", f_bin(1, table) + f_bin(2, b"") + f_bool(3, True))
            locations = [primary] + [location for location in locations if location.get(2, {}).get(7, 0) != 0]
        for location in locations:
            server = location.get(1, {})
            address = "%s:%d" % (server.get(1, b"?").decode(errors="replace"), server.get(2, 0))
            located.append((address, table.decode(errors="replace"), location.get(2, {}).get(7, 0)))
    return located


def get_row(conn, table, row):
    results = conn.call("getRow", f_bin(1, table) + f_bin(2, row) + f_empty_map(3)) or []
    cells = {}
    for res in results:  # TRowResult {1: row, 2: map<col, TCell{1: value, 2: ts}>}
        for col, cell in res.get(2, []):
            cells[col.decode(errors="replace")] = cell.get(1, b"")
    return cells


def f_empty_struct(fid):
    return f_hdr(T_STRUCT, fid) + bytes([T_STOP])


def warm(conn, seconds, thrift2_conn=None):
    """Scans every table, 500 rows a call, until each is read or `seconds` pass."""
    deadline = time.monotonic() + seconds
    tables, rows, calls = 0, 0, 0
    for table in conn.call("getTableNames") or []:
        if time.monotonic() >= deadline:
            break
        tables += 1
        # scannerOpen(1: table, 2: startRow, 3: columns, 4: attributes) -> scanner id
        scanner = conn.call("scannerOpen", f_bin(1, table) + f_bin(2, b"")
                            + f_hdr(T_LIST, 3) + struct.pack("!bi", T_STRING, 0) + f_empty_map(4))
        sample = []
        try:
            while time.monotonic() < deadline:
                batch = conn.call("scannerGetList", f_i32(1, scanner) + f_i32(2, 500)) or []
                calls += 1
                rows += len(batch)
                sample.extend(result.get(1, b"") for result in batch[:: max(1, len(batch) // 50)])
                if not batch:
                    break
        finally:
            conn.call("scannerClose", f_i32(1, scanner))
        # Multi-gets of 20 rows, as a page's comments are read: the get path too.
        for start in range(0, min(len(sample), 2000), 20):
            if time.monotonic() >= deadline:
                break
            keys = sample[start:start + 20]
            conn.call("getRows", f_bin(1, table) + f_hdr(T_LIST, 2) + struct.pack("!bi", T_STRING, len(keys))
                      + b"".join(struct.pack("!i", len(key)) + key for key in keys) + f_empty_map(3))
            calls += 1
        if thrift2_conn is not None:
            # getScannerResults(1: table, 2: TScan (every row), 3: numRows): Thrift2's scan path.
            for _ in range(20):
                thrift2_conn.call("getScannerResults", f_bin(1, table) + f_empty_struct(2) + f_i32(3, 50))
                calls += 1
    return tables, rows, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9090)
    ap.add_argument("--timeout", type=float, default=10.0, help="socket timeout per call, seconds")
    ap.add_argument("cmd", choices=["tables", "tables2", "regions", "smoke", "get", "warm"])
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()

    try:
        conn = Conn(a.host, a.port, a.timeout)
    except OSError as e:
        print("probe: cannot connect to %s:%d: %s" % (a.host, a.port, e), file=sys.stderr)
        return 1
    try:
        if a.cmd in ("tables", "tables2"):
            names = get_table_names(conn) if a.cmd == "tables" else get_table_names_thrift2(conn)
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            print("%d tables%s" % (len(names), ": " + shown if names else ""))
        elif a.cmd == "regions":
            for address, table, replica in region_locations(conn):
                print("%s %s %d" % (address, table, replica))
        elif a.cmd == "warm":
            started = time.monotonic()
            thrift2_conn = Conn(a.host, int(a.rest[1]), a.timeout) if len(a.rest) > 1 else None
            try:
                tables, rows, calls = warm(conn, float(a.rest[0]), thrift2_conn)
            finally:
                if thrift2_conn is not None:
                    thrift2_conn.close()
            print("warmed %d tables: %d rows in %d calls, %.1f s" % (tables, rows, calls, time.monotonic() - started))
        elif a.cmd == "get":
            table, row = a.rest
            for col, val in sorted(get_row(conn, table, row).items()):
                print("%s = %s" % (col, val.decode(errors="replace")))
        else:
            table = a.rest[0] if a.rest else "hbasectl_smoke"
            if table not in get_table_names(conn):
                conn.call("createTable", f_bin(1, table) + f_list_struct(2, [column_descriptor("cf:")]))
                print("smoke: created table %s" % table)
            value = "v-%d" % int(time.time())
            conn.call("mutateRow", f_bin(1, table) + f_bin(2, "row1")
                      + f_list_struct(3, [mutation("cf:q", value)]) + f_empty_map(4))
            got = get_row(conn, table, "row1").get("cf:q", b"").decode(errors="replace")
            if got != value:
                print("smoke: wrote %r but read back %r" % (value, got), file=sys.stderr)
                return 1
            print("smoke: put/get %s row1 cf:q=%s ok" % (table, value))
        return 0
    except (OSError, ThriftError, ValueError, struct.error) as e:
        print("probe: %s failed: %s" % (a.cmd, e), file=sys.stderr)
        return 1
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
