"""CPU tests of mgpu_lab.kernels.gemm.torch_linear (the router of nn.Linear layers to the GEMM) on a
tiny Hugging Face Llama: with a stand-in GEMM
factory (F.linear's product as an op), the routed model's logits equal the original's and every
nn.Linear was routed. Needs torch and transformers (skipped without them)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from mgpu_lab.kernels.gemm.torch_linear import LinearRouter, op_name, route_linears  # noqa: E402


STAND_IN_DTYPES = ("float32", "bfloat16", "float16")  # the stand-in computes in any dtype


def stand_in_factory(made: list):
    """(m, n, k, has_bias, dtype) -> an op computing F.linear's product from (x, weight[, bias]),
    checking it gets the 2-D contiguous input the real GEMM op needs."""
    def factory(m: int, n: int, k: int, has_bias: bool, dtype: str):
        made.append((m, n, k, has_bias))

        def op(x, weight, bias=None):
            assert x.shape == (m, k) and x.is_contiguous() and weight.shape == (n, k)
            assert (bias is not None) == has_bias
            y = x @ weight.T
            return y if bias is None else y + bias

        return op

    return factory


def tiny_llama(**overrides):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=96,
                                      max_position_embeddings=128, **overrides)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def linears(model) -> int:
    return sum(isinstance(m, torch.nn.Linear) for m in model.modules())


def test_routed_llama_matches_the_original_and_routes_every_linear():
    model = tiny_llama()
    routed = copy.deepcopy(model, memo={id(p): p for p in model.parameters()})  # the same weights
    made: list = []
    router = LinearRouter(stand_in_factory(made), dtypes=STAND_IN_DTYPES)
    assert router.route(routed) == linears(model) == 2 * 7 + 1  # q k v o gate up down per layer, lm_head
    ids = torch.randint(0, 96, (3, 11), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want, got = model(input_ids=ids).logits, routed(input_ids=ids).logits
    torch.testing.assert_close(got, want)
    assert router.routed_calls == linears(model) and not router.fallback_calls
    # one op per (m, n, k): q/o, k/v, gate/up share theirs, down and lm_head have their own
    assert sorted(made) == sorted({(33, 64, 64, False), (33, 32, 64, False), (33, 176, 64, False),
                                   (33, 64, 176, False), (33, 96, 64, False)})
    assert set(router.shapes_built()) == {f"{m}x{n}x{k}_float32" for m, n, k, _ in made}  # not bf16: named


def test_routing_takes_a_bias_sliced_inputs_and_comes_back_out():
    model = tiny_llama(attention_bias=True)
    made: list = []
    router = LinearRouter(stand_in_factory(made), dtypes=STAND_IN_DTYPES)
    with torch.inference_mode():
        want = model(input_ids=torch.arange(10).reshape(2, 5), logits_to_keep=1).logits
        router.route(model)
        # logits_to_keep=1 slices the last position out of a batch: lm_head gets a non-contiguous input
        got = model(input_ids=torch.arange(10).reshape(2, 5), logits_to_keep=1).logits
        router.unroute()
        again = model(input_ids=torch.arange(10).reshape(2, 5), logits_to_keep=1).logits
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(again, want)
    assert (10, 64, 64, True) in made and (2, 96, 64, False) in made
    assert not any("forward" in vars(m) for m in model.modules())


def test_calls_the_gemm_cannot_take_fall_back_and_are_counted():
    layer = torch.nn.Linear(8, 4)
    router = LinearRouter(stand_in_factory([]), dtypes=STAND_IN_DTYPES)
    router.route(layer)
    x = torch.randn(2, 0, 8)
    assert layer(x).shape == (2, 0, 4)
    assert router.fallback_calls == {"empty input": 1} and router.routed_calls == 0


def test_op_names_are_identifiers_and_unique_per_shape():
    names = {op_name(m, n, k, b, t) for m in (1, 2048) for n in (512, 32000) for k in (2048, 5632)
             for b in (False, True) for t in (None, "auto")}
    assert len(names) == 32
    assert all(name.split("::")[0].isidentifier() and name.split("::")[1].isidentifier() for name in names)


def test_a_routed_layer_reads_its_weight_per_call_and_builds_once_per_shape():
    """The routed forward holds the layer's parameter dict, not its tensors: a weight replaced
    after routing is the one used; each shape's op is made once, however many calls."""
    layer = torch.nn.Linear(8, 4, bias=False)
    made: list = []
    router = LinearRouter(stand_in_factory(made), dtypes=STAND_IN_DTYPES)
    router.route(layer)
    x = torch.randn(3, 5, 8)
    with torch.inference_mode():
        first = layer(x)
        layer.weight = torch.nn.Parameter(2 * layer.weight.detach())
        second = layer(x)
        for _ in range(3):
            layer(x)
    torch.testing.assert_close(second, 2 * first)
    assert made == [(15, 4, 8, False)] and router.routed_calls == 5


def test_an_op_with_reshaped_gets_the_layers_own_shapes_and_is_asked_once_per_input_shape():
    """Our TorchOp has `reshaped`: the router asks it once per input shape for a call over the
    (..., k) input and the (..., n) output, and calls that with no view on either side."""
    asked, ran = [], []

    class ShapedOp:
        def __init__(self, m, n, k, has_bias):
            self.m, self.n, self.k = m, n, k

        def __call__(self, *tensors):
            raise AssertionError("the router calls the reshaped op, not the (m, k) one")

        def reshaped(self, input_shapes, output_shapes):
            asked.append((input_shapes, output_shapes))

            def call(x, weight, bias=None):
                ran.append(tuple(x.shape))
                y = x @ weight.T
                return y if bias is None else y + bias

            return call

    layer = torch.nn.Linear(8, 4)
    reference = copy.deepcopy(layer)
    router = LinearRouter(lambda m, n, k, has_bias, dtype: ShapedOp(m, n, k, has_bias), dtypes=STAND_IN_DTYPES)
    router.route(layer)
    with torch.inference_mode():
        for x in (torch.randn(3, 5, 8), torch.randn(3, 5, 8), torch.randn(2, 8)):
            torch.testing.assert_close(layer(x), reference(x))
    assert asked == [([(3, 5, 8), (4, 8), (4,)], [(3, 5, 4)]), ([(2, 8), (4, 8), (4,)], [(2, 4)])]
    assert ran == [(3, 5, 8), (3, 5, 8), (2, 8)] and router.routed_calls == 3
    assert list(router.ops) == [(15, 4, 8, True, "float32"), (2, 4, 8, True, "float32")]



def test_a_strided_input_of_a_shape_already_routed_falls_back_to_the_general_path():
    """Contiguity is checked on every call: a strided input of a shape whose call is cached
    takes the general path (made contiguous there), never the cached call."""
    layer = torch.nn.Linear(8, 4, bias=False)
    reference = copy.deepcopy(layer)
    router = LinearRouter(stand_in_factory([]), dtypes=STAND_IN_DTYPES)
    router.route(layer)
    with torch.inference_mode():
        x = torch.randn(3, 5, 8)
        torch.testing.assert_close(layer(x), reference(x))
        strided = torch.randn(3, 5, 16)[..., ::2]
        assert not strided.is_contiguous()
        torch.testing.assert_close(layer(strided), reference(strided))
    assert router.routed_calls == 2 and not router.fallback_calls


def test_a_dtype_without_a_kernel_keeps_f_linear_and_says_why():
    """By default the router takes the GEMM's dtypes (bf16, fp16): a float32 layer never asks the
    factory for an op, its calls go to F.linear, counted with the reason."""
    layer = torch.nn.Linear(8, 4)
    reference = copy.deepcopy(layer)
    made: list = []
    router = LinearRouter(stand_in_factory(made))
    router.route(layer)
    with torch.inference_mode():
        for _ in range(2):
            x = torch.randn(3, 5, 8)
            torch.testing.assert_close(layer(x), reference(x))
    assert made == [] and router.routed_calls == 0
    assert router.fallback_calls == {"no kernel for torch.float32": 2}


def test_each_dtype_gets_its_own_op():
    made: list = []
    dtypes_asked: list = []

    def factory(m, n, k, has_bias, dtype):
        dtypes_asked.append(dtype)
        return stand_in_factory(made)(m, n, k, has_bias, dtype)

    router = LinearRouter(factory)
    half, brain = torch.nn.Linear(8, 4).half(), torch.nn.Linear(8, 4).bfloat16()
    for layer in (half, brain):
        router.route(layer)
    with torch.inference_mode():
        half(torch.randn(2, 8).half())
        brain(torch.randn(2, 8).bfloat16())
    assert dtypes_asked == ["float16", "bfloat16"]
    assert list(router.ops) == [(2, 4, 8, True, "float16"), (2, 4, 8, True, "bfloat16")]
    assert router.shapes_built().keys() == {"2x4x8_bias_float16", "2x4x8_bias"}


def test_route_linears_refuses_an_unknown_tune_by_name():
    with pytest.raises(ValueError, match=r"tune: expected None or 'auto', got 'fast'"):
        route_linears(torch.nn.Linear(8, 4), tune="fast")


def test_op_names_differ_by_dtype():
    assert op_name(16, 64, 32, False) != op_name(16, 64, 32, False, dtype="float16")
    assert op_name(16, 64, 32, True, "auto", "float16").split("::")[1].isidentifier()
