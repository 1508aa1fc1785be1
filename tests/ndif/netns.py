"""Run a command (the NDIF stack) in a network namespace of its own, reachable only through given ports.

Ray's gRPC servers listen on 0.0.0.0 whatever ``--node-ip-address`` says. This process first binds the
ports a client needs (the API, the object store) on the host's 127.0.0.1, then moves itself into a new
network namespace that has only a loopback device (``unshare(CLONE_NEWNET)``: root only), runs the
command there (its children inherit the namespace) and forwards every host connection to the same
port inside. Nothing else the stack opens can be reached from the host, or from anywhere.

    python netns.py 8001,9000 bash stack.sh

Exits with the command's code if it fails; otherwise forwards until it is killed (down.sh).
Standard library only, so any Python runs it.

Faults on demand, for tests/models/test_remote.py (the stack keeps running through both):

* ``SIGUSR1`` drops every forwarded connection now open: the network between client and server fails.
* ``SIGUSR2`` toggles refusing new connections to every port after the first (the object store): the
  client cannot reach the store its results are downloaded from.

Once a fault is in place, the count of signals handled is written to ``$NDIF_HOME/faults``, so that a
test can wait for it rather than guess how long the forwarder takes.
"""
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
LIVE: set = set()             # the sockets of every open forwarded connection
LOCK = threading.Lock()
REFUSED: set = set()          # ports whose new connections are refused (SIGUSR2)
HANDLED = [0]                 # signals handled, as written to ACKS
ACKS = os.path.join(os.environ.get("NDIF_HOME", "."), "faults")


def acknowledge() -> None:
    """Write how many fault signals were handled (atomically: a reader sees the old count or the new)."""
    HANDLED[0] += 1
    with open(ACKS + ".part", "w") as f:
        f.write(str(HANDLED[0]))
    os.replace(ACKS + ".part", ACKS)


def drop(*_) -> None:
    """SIGUSR1: cut every open forwarded connection."""
    with LOCK:
        live = list(LIVE)
    for s in live:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    acknowledge()


def toggle_store(ports: list) -> None:
    """SIGUSR2: refuse (or accept again) connections to every port after the first."""
    for port in ports[1:]:
        REFUSED.symmetric_difference_update({port})
    acknowledge()


def pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with LOCK:
            LIVE.difference_update((src, dst))


def forward(listener: socket.socket, port: int) -> None:
    while True:
        outer, _ = listener.accept()          # a host connection
        if port in REFUSED:
            outer.close()
            continue
        try:
            inner = socket.create_connection(("127.0.0.1", port))  # made in this thread: inside the namespace
        except OSError:
            outer.close()
            continue
        with LOCK:
            LIVE.update((outer, inner))
        for a, b in ((outer, inner), (inner, outer)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def main() -> int:
    ports = [int(p) for p in sys.argv[1].split(",")]
    signal.signal(signal.SIGUSR1, drop)
    signal.signal(signal.SIGUSR2, lambda *_: toggle_store(ports))
    listeners = []
    for port in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            print(f"netns.py: host port 127.0.0.1:{port} is taken ({e.strerror}); stop what holds it", flush=True)
            return 1
        s.listen(64)
        listeners.append((s, port))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:  # before any thread exists: every later thread and child is inside
        print(f"netns.py: cannot create a network namespace ({os.strerror(ctypes.get_errno())}; it needs root); "
              "NDIF_ISOLATE=0 runs the stack without one", flush=True)
        return 1
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for s, port in listeners:
        threading.Thread(target=forward, args=(s, port), daemon=True).start()
    rc = subprocess.call(sys.argv[2:])
    if rc:
        return rc
    threading.Event().wait()  # forward until killed
    return 0


if __name__ == "__main__":
    sys.exit(main())
