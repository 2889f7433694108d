#!/usr/bin/env python3
"""An OTLP/HTTP metrics receiver for the tests, built on the official
opentelemetry-proto bindings: every POST to /v1/metrics is gunzipped (when its
Content-Encoding says gzip) and parsed as an ExportMetricsServiceRequest; a request
that does not decode is answered 400 and recorded as such. Each data point is written
to OUT as one JSON line, with its metric's name, type, unit, temporality and
monotonicity and the request's Resource. The port the receiver took is printed on
standard output, one line, once it serves.

Usage: receiver.py OUT [--port N] [--refuse N] [--partial N] [--cert PEM --key PEM]
  --port N    listen on 127.0.0.1:N (default 0: the kernel chooses)
  --refuse N  answer the first N requests 400 with a google.rpc.Status (a
              refusal), recording how many points each held and none of them
  --partial N then answer N requests 200 with a partial success that rejects
              3 of their points (recorded as such, their points as usual)
  --cert/--key  serve HTTPS with this certificate
"""
import argparse
import gzip
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

# The most a request body may be (the exporter sends far less).
MAX_BODY = 64 * 1024 * 1024


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(kvs):
    return {kv.key: value_of(kv.value) for kv in kvs}


def points_of(request):
    return sum(len(getattr(m, m.WhichOneof("data")).data_points)
               for rm in request.resource_metrics
               for sm in rm.scope_metrics
               for m in sm.metrics)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="application/x-protobuf"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, line):
        self.server.out.write(json.dumps(line) + "\n")
        self.server.out.flush()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        if self.path != "/v1/metrics" or length > MAX_BODY:
            return self.answer(404, b"not here\n", "text/plain")
        raw = self.rfile.read(length)
        try:
            if self.headers.get("Content-Encoding", "") == "gzip":
                raw = gzip.decompress(raw)
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(raw)
        except Exception as e:  # the test fails on any line that says so
            self.record({"undecodable": str(e), "type": self.headers.get("Content-Type")})
            return self.answer(400, b"undecodable\n", "text/plain")
        if self.server.refuse > 0:
            self.server.refuse -= 1
            self.record({"refused": True, "points": points_of(request)})
            # A google.rpc.Status, as OTLP/HTTP answers a refusal: code 3
            # (INVALID_ARGUMENT) and its message.
            message = b"refused by the test"
            status = b"\x08\x03\x12" + bytes([len(message)]) + message
            return self.answer(400, status)
        response = metrics_service_pb2.ExportMetricsServiceResponse()
        if self.server.partial > 0:
            self.server.partial -= 1
            response.partial_success.rejected_data_points = 3
            response.partial_success.error_message = "3 points rejected by the test"
            self.record({"partial": True, "points": points_of(request)})
        self.record({"request": True, "type": self.headers.get("Content-Type"),
                     "encoding": self.headers.get("Content-Encoding"),
                     "authorization": self.headers.get("Authorization"),
                     "tenant": self.headers.get("X-Scope-OrgID")})
        for rm in request.resource_metrics:
            resource = attributes(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    data = getattr(m, kind)
                    for p in data.data_points:
                        line = {
                            "name": m.name,
                            "unit": m.unit,
                            "kind": kind,
                            "scope": sm.scope.name,
                            "start": p.start_time_unix_nano,
                            "time": p.time_unix_nano,
                            "value_kind": p.WhichOneof("value"),
                            "value": p.as_double if p.WhichOneof("value") == "as_double" else p.as_int,
                            "attributes": attributes(p.attributes),
                            "resource": resource,
                        }
                        if kind == "sum":
                            line["temporality"] = data.aggregation_temporality
                            line["monotonic"] = data.is_monotonic
                        self.record(line)
        self.answer(200, response.SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--refuse", type=int, default=0)
    ap.add_argument("--partial", type=int, default=0)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    a = ap.parse_args()
    server = HTTPServer(("127.0.0.1", a.port), Handler)
    server.out = open(a.out, "a")
    server.refuse = a.refuse
    server.partial = a.partial
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
