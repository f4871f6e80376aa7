"""The client's settings and its retries, without a server."""

import socket
import tempfile
import unittest

import grpc

from convstate_client import ConfigurationError, ConvStateClient, ConvStateError, is_loopback


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConfigurationTest(unittest.TestCase):
    def test_defaults(self):
        with ConvStateClient.from_env({}) as client:
            self.assertEqual(client.address, "localhost:50051")
            self.assertEqual(client.timeout, 30.0)
            self.assertEqual(client.tenant, "")
            self.assertFalse(client.tls)

    def test_environment(self):
        with tempfile.NamedTemporaryFile() as ca:
            env = {"CONVSTATE_ADDRESS": "convstate.example:443", "CONVSTATE_TOKEN": "cst_abc",
                   "CONVSTATE_CACERT": ca.name, "CONVSTATE_TENANT": "acme",
                   "CONVSTATE_TIMEOUT_MS": "2500", "CONVSTATE_CERT": ""}
            with ConvStateClient.from_env(env) as client:
                self.assertEqual(client.address, "convstate.example:443")
                self.assertTrue(client.tls)
                self.assertEqual(client.tenant, "acme")
                self.assertEqual(client.timeout, 2.5)
                self.assertEqual(client._metadata, (("authorization", "Bearer cst_abc"),))
            # Arguments win over the environment.
            with ConvStateClient.from_env(env, tenant="other", timeout=1) as client:
                self.assertEqual(client.tenant, "other")
                self.assertEqual(client.timeout, 1.0)

    def test_refusals(self):
        cases = [
            ({"CONVSTATE_ADDRESS": "convstate.example:50051", "CONVSTATE_TOKEN": "t"},
             "refusing to send the token in plaintext"),
            ({"CONVSTATE_CACERT": "/nonexistent/ca.pem"}, "ca_cert: cannot read"),
            ({"CONVSTATE_CERT": "/c.pem"}, "cert and key: give both"),
            ({"CONVSTATE_CERT": "/c.pem", "CONVSTATE_KEY": "/k.pem"}, "needs ca_cert"),
            ({"CONVSTATE_TENANT": "no spaces"}, "tenant"),
            ({"CONVSTATE_TIMEOUT_MS": "soon"}, "CONVSTATE_TIMEOUT_MS"),
            ({"CONVSTATE_TOKEN": "two words"}, "token: printable ASCII"),
        ]
        for env, message in cases:
            with self.subTest(env=env):
                with self.assertRaisesRegex(ConfigurationError, message):
                    ConvStateClient.from_env(env)

    def test_plaintext_token_to_loopback_is_allowed(self):
        for address in ("localhost:1", "127.0.0.1:1", "[::1]:1"):
            ConvStateClient(address, token="t").close()
        ConvStateClient("convstate.example:1", token="t", allow_insecure_token=True).close()

    def test_is_loopback(self):
        for address in ("localhost:50051", "127.0.0.1:1", "127.1.2.3:9", "[::1]:50051",
                        "dns:///localhost:50051", "unix:/run/convstate.sock"):
            self.assertTrue(is_loopback(address), address)
        for address in ("convstate:50051", "10.0.0.1:50051", "[2001:db8::1]:443", "localhost.evil:1"):
            self.assertFalse(is_loopback(address), address)

    def test_invalid_ids_are_refused_before_any_call(self):
        with ConvStateClient(f"127.0.0.1:{unused_port()}", max_attempts=1) as client:
            with self.assertRaisesRegex(ValueError, "conversation_id"):
                client.before_inference("bad id", [{"role": "user", "content": "x"}])
            with self.assertRaisesRegex(ValueError, "format"):
                client.before_inference("ok", [], format="gemini")


class RetryTest(unittest.TestCase):
    """Against a port where nothing listens: every attempt is UNAVAILABLE."""

    def setUp(self):
        self.retries = []
        self.client = ConvStateClient(
            f"127.0.0.1:{unused_port()}", max_attempts=3, initial_backoff=0.01, max_backoff=0.05,
            timeout=5, on_retry=lambda method, attempt, error, delay: self.retries.append(
                (method, attempt, error.code())))

    def tearDown(self):
        self.client.close()

    def test_reads_are_retried(self):
        with self.assertRaises(ConvStateError) as caught:
            self.client.get_conversation("c")
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(caught.exception.attempts, 3)
        self.assertEqual(self.retries, [("GetConversation", 1, grpc.StatusCode.UNAVAILABLE),
                                        ("GetConversation", 2, grpc.StatusCode.UNAVAILABLE)])
        self.assertIn("after 3 attempts", str(caught.exception))

    def test_appends_with_a_key_are_retried(self):
        with self.assertRaises(ConvStateError) as caught:
            self.client.after_inference("c", {"role": "assistant", "content": "hi"})
        self.assertEqual(caught.exception.attempts, 3)
        self.assertEqual([r[0] for r in self.retries], ["AppendTurn", "AppendTurn"])

    def test_calls_not_safe_to_repeat_are_sent_once(self):
        with self.assertRaises(ConvStateError) as caught:
            self.client.create_conversation("c", "gpt-4o")
        self.assertEqual((caught.exception.code, caught.exception.attempts),
                         (grpc.StatusCode.UNAVAILABLE, 1))
        with self.assertRaises(ConvStateError) as caught:
            self.client.report_overflow("c")
        self.assertEqual(caught.exception.attempts, 1)
        self.assertEqual(self.retries, [])


if __name__ == "__main__":
    unittest.main()
