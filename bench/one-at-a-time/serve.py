"""An HTTP/1.1 origin that serves one connection at a time: a single-threaded server with
keep-alive and byte ranges, the rest of its clients waiting in its listen backlog.

Usage: python3 serve.py FILE   (listens on 127.0.0.1, a port the kernel picks, printed)
"""
import http.server
import os
import re
import sys

PATH = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.answer(body=False)

    def do_GET(self):
        self.answer(body=True)

    def answer(self, body):
        size = os.path.getsize(PATH)
        lo, hi = 0, size - 1
        asked = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if asked:
            lo = int(asked.group(1) or 0)
            hi = min(int(asked.group(2)), size - 1) if asked.group(2) else size - 1
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {lo}-{hi}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(hi - lo + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"v1"')
        self.end_headers()
        if not body:
            return
        with open(PATH, "rb") as f:
            f.seek(lo)
            left = hi - lo + 1
            try:
                while left > 0:
                    chunk = f.read(min(65536, left))
                    self.wfile.write(chunk)
                    left -= len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(f"serving on 127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
