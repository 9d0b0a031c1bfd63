"""Model control modes (poll, none) and cancellation when a client disconnects or gives up."""
import json
import shutil
import socket
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import ONNX, add_model, start_server, stop_server


def wait_until(fn, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        if fn():
            return True
        time.sleep(0.1)
    return False


def metric(server, name, labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith(name + "{") and all(l in line for l in labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_poll_mode_follows_the_repository(tmp_path):
    repo = tmp_path / "models"
    add_model(repo, "polled")
    s = start_server(repo, tmp_path / "cache", "--model-control-mode", "poll",
                     "--repository-poll-secs", "1")
    try:
        c = httpclient.InferenceServerClient(s.http_url)
        assert c.get_model_metadata("polled")["versions"] == ["1"]
        with pytest.raises(InferenceServerException, match="not allowed"):
            c.load_model("polled")
        (repo / "polled" / "2").mkdir()
        shutil.copy(ONNX, repo / "polled" / "2" / "model.onnx")
        assert wait_until(lambda: c.get_model_metadata("polled")["versions"] == ["2"])
        add_model(repo, "added")
        assert wait_until(lambda: c.is_model_ready("added"))
        shutil.rmtree(repo / "added")
        assert wait_until(lambda: not c.is_model_ready("added"))
        assert c.is_model_ready("polled")
        c.close()
    finally:
        assert stop_server(s) == 0


def test_none_mode_refuses_load_and_unload(tmp_path):
    repo = tmp_path / "models"
    add_model(repo, "fixed")
    s = start_server(repo, tmp_path / "cache")
    try:
        c = httpclient.InferenceServerClient(s.http_url)
        assert c.is_model_ready("fixed")
        with pytest.raises(InferenceServerException):
            c.unload_model("fixed")
        assert c.is_model_ready("fixed")
        c.close()
    finally:
        assert stop_server(s) == 0


def drop_http_request(s):
    ids = [[1, 2, 3, 4]]
    body = json.dumps({"inputs": [
        {"name": n, "datatype": "INT64", "shape": [1, 4], "data": ids}
        for n in ("input_ids", "attention_mask", "token_type_ids")]}).encode()
    req = (f"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    sock = socket.create_connection(("127.0.0.1", s.http))
    sock.sendall(req)
    time.sleep(0.3)
    sock.close()


def grpc_inputs():
    inputs = []
    for n in ("input_ids", "attention_mask", "token_type_ids"):
        t = grpcclient.InferInput(n, [1, 4], "INT64")
        t.set_data_from_numpy(np.array([[1, 2, 3, 4]], dtype=np.int64))
        inputs.append(t)
    return inputs


def drop_grpc_request(s):
    # The client's deadline runs out while the request is queued: gRPC cancels the call.
    c = grpcclient.InferenceServerClient(s.grpc_url)
    with pytest.raises(InferenceServerException):
        c.infer("slow", grpc_inputs(), client_timeout=0.3)
    c.close()


def drop_grpc_stream(s):
    c = grpcclient.InferenceServerClient(s.grpc_url)
    c.start_stream(callback=lambda result, error: None)
    c.async_stream_infer("slow", grpc_inputs())
    time.sleep(0.3)
    c.stop_stream(cancel_requests=True)
    c.close()


@pytest.mark.parametrize("drop", [drop_http_request, drop_grpc_request, drop_grpc_stream])
def test_disconnected_client_is_cancelled_in_the_queue(tmp_path, drop):
    repo = tmp_path / "models"
    # A long batching delay keeps a lone request queued for 5 s.
    add_model(repo, "slow", queue="preferred_batch_size: [ 8 ]", delay_us=5000000)
    s = start_server(repo, tmp_path / "cache")
    try:
        drop(s)
        labels = ('model="slow"', 'reason="CANCELED"')
        start = time.time()
        assert wait_until(lambda: metric(s, "nv_inference_request_failure", labels) >= 1, 4.0)
        assert time.time() - start < 4.0  # well before the 5 s batching delay ran out
        assert metric(s, "nv_inference_pending_request_count", ('model="slow"',)) == 0
    finally:
        assert stop_server(s) == 0


def test_admin_token_guards_the_repository_api(tmp_path, monkeypatch):
    repo = tmp_path / "models"
    add_model(repo, "guarded")
    monkeypatch.setenv("SURGE_ADMIN_TOKEN", "s3cret")
    s = start_server(repo, tmp_path / "cache", "--model-control-mode", "explicit",
                     "--load-model", "guarded")
    try:
        c = httpclient.InferenceServerClient(s.http_url)
        with pytest.raises(InferenceServerException):
            c.unload_model("guarded")
        assert c.is_model_ready("guarded")
        c.unload_model("guarded", headers={"Authorization": "Bearer s3cret"})
        assert not c.is_model_ready("guarded")
        # Inference and metadata stay open.
        assert c.is_server_live()
        c.close()
        g = grpcclient.InferenceServerClient(s.grpc_url)
        with pytest.raises(InferenceServerException):
            g.load_model("guarded")
        with pytest.raises(InferenceServerException):
            g.get_model_repository_index()
        assert not g.is_model_ready("guarded")
        g.load_model("guarded", headers={"authorization": "Bearer s3cret"})
        assert g.is_model_ready("guarded")
        assert g.get_model_metadata("guarded").name == "guarded"
        g.close()
    finally:
        assert stop_server(s) == 0
