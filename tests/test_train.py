"""Chapter 4's task, model and training: the task asks what it says, the
equal-size models really are equal in size, and training lowers the loss the
same way on one thread or many."""

import pytest
import torch
from torch import nn

from mha import plots_training
from mha import train as train_module
from mha.plots_training import plot_attention_maps, plot_query_weight_trained
from mha.tasks import (
    LookbackModel,
    LookbackTask,
    accuracy_band,
    describe_head,
    describe_pair,
    parameter_count,
    position_over_token,
    read_heads,
    read_pairs,
    weight_by_offset,
)
from mha.train import progress_bar, train, train_all

TINY = LookbackTask(offsets=(1, 2), vocab_size=4, num_tokens=5, train_size=32, eval_size=64)


def tiny_model(num_heads=2, seed=0):
    torch.manual_seed(seed)
    return LookbackModel(TINY, d_model=8, num_heads=num_heads)


def test_targets_are_the_tokens_each_offset_back():
    task = LookbackTask(offsets=(1, 3), num_tokens=6)
    tokens = task.sequences(5, seed=7)  # (5, 6)
    targets = task.targets(tokens)  # (5, 6, 2)
    for i, k in enumerate(task.offsets):
        for t in range(task.first_scored, task.num_tokens):
            assert torch.equal(targets[:, t, i], tokens[:, t - k])


def scored_rows(task, logits, tokens):
    """The chapter's answers as rows: ``(answers, vocab)`` scores and ``(answers,)`` targets."""
    start = task.first_scored
    rows = logits[:, start:].reshape(-1, task.vocab_size)  # (answers, vocab)
    return rows, task.targets(tokens)[:, start:].reshape(-1)  # (answers,)


def random_logits(task, count=16):
    torch.manual_seed(0)
    shape = (count, task.num_tokens, len(task.offsets), task.vocab_size)
    return torch.randn(shape, requires_grad=True)  # (b, T, num_offsets, vocab)


def assert_loss_is_rowwise_cross_entropy(loss_of):
    """``loss_of(task, logits, tokens)`` and its gradient equal PyTorch's cross-entropy over the
    scored answers, one row of vocab_size scores each, to float32 rounding (relative 1e-6 for
    the loss, 1e-5 for the gradient); positions before first_scored get no gradient."""
    task = LookbackTask()
    tokens = task.sequences(16, seed=3)  # (16, num_tokens)
    logits = random_logits(task)
    expected = nn.functional.cross_entropy(*scored_rows(task, logits, tokens))
    loss = loss_of(task, logits, tokens)
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-7)
    (grad,) = torch.autograd.grad(loss, logits)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-8)
    assert torch.all(grad[:, : task.first_scored] == 0)


def test_the_loss_is_the_cross_entropy_of_the_scored_answers_as_rows():
    """Laid out as one batch for speed, the loss is still the row-wise cross-entropy."""
    assert_loss_is_rowwise_cross_entropy(LookbackTask.loss)


def reshaped_loss(task, logits, tokens):
    """A reshape where the loss permutes: every shape as before, but the scores of different
    answers mixed into one distribution."""
    scored = logits[:, task.first_scored :]  # (b, scored, num_offsets, vocab)
    mixed = scored.reshape(1, task.vocab_size, *scored.shape[:3])  # (1, vocab, b, scored, offsets)
    wanted = task.targets(tokens)[:, task.first_scored :].unsqueeze(0)
    return nn.functional.cross_entropy(mixed, wanted)


def test_the_loss_comparison_would_see_scores_moved_to_the_wrong_axis():
    with pytest.raises(AssertionError):
        assert_loss_is_rowwise_cross_entropy(reshaped_loss)


def test_the_evaluation_set_is_fixed_and_apart_from_the_training_set():
    task = LookbackTask()
    assert torch.equal(task.eval_set(), task.eval_set())
    assert torch.equal(task.train_set(), LookbackTask().train_set())
    assert not torch.equal(task.eval_set()[: task.train_size], task.train_set())


def test_a_task_that_cannot_work_says_what_to_change():
    for offsets, words in (((), "distinct positive"), ((1, 1), "distinct"), ((0,), "positive")):
        try:
            LookbackTask(offsets=offsets)
        except ValueError as error:
            assert words in str(error)
        else:
            raise AssertionError(f"offsets={offsets} was accepted")
    try:
        LookbackTask(offsets=(1, 10), num_tokens=10)
    except ValueError as error:
        assert "smaller than num_tokens=10" in str(error)
    else:
        raise AssertionError("an offset as long as the sequence was accepted")


def test_equal_width_models_have_equal_parameter_counts_whatever_the_head_count():
    task = LookbackTask()
    counts = {h: parameter_count(LookbackModel(task, 32, h)) for h in (1, 2, 4, 8)}
    assert len(set(counts.values())) == 1, counts
    attention = [LookbackModel(task, 32, h).attention for h in (1, 2, 4)]
    assert len({parameter_count(a) for a in attention}) == 1


def test_the_model_outputs_one_distribution_per_offset_at_every_position():
    model = tiny_model()
    tokens = TINY.sequences(3, seed=0)  # (3, 5)
    assert model(tokens).shape == (3, TINY.num_tokens, 2, TINY.vocab_size)


def test_attention_weights_are_the_ones_the_forward_pass_uses():
    model = tiny_model(num_heads=2).eval()
    tokens = TINY.sequences(3, seed=0)
    attn = model.attention
    weights = model.attention_weights(tokens)  # (b, h, T, T)
    with torch.no_grad():
        values = attn.split_heads(attn.W_value(model.embed(tokens)))  # (b, h, T, head_dim)
        context = (weights @ values).transpose(1, 2).reshape(3, TINY.num_tokens, -1)
        assert torch.allclose(attn.out_proj(context), attn(model.embed(tokens)), atol=1e-6)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, TINY.num_tokens))
    assert torch.all(weights.triu(1) == 0)


def test_the_reading_finds_the_offset_a_head_attends_to():
    num_tokens = 6
    weights = torch.zeros(2, 2, num_tokens, num_tokens)  # (b, h, T, T)
    for q in range(num_tokens):
        weights[:, 0, q, max(q - 2, 0)] = 1.0  # head 1 looks two back
        weights[:, 1, q, q] = 1.0  # head 2 looks at its own position
    by_offset = weight_by_offset(weights, first_scored=2)
    assert by_offset.shape == (2, num_tokens)
    assert by_offset[0, 2] == 1.0 and by_offset[1, 0] == 1.0

    class Fixed(nn.Module):
        task = LookbackTask(offsets=(2,), num_tokens=num_tokens)

        def attention_weights(self, tokens):
            return weights

    assert read_heads(Fixed(), torch.zeros(2, num_tokens)) == [(2, 1.0), (0, 1.0)]


def test_a_tiny_run_returns_one_loss_per_step_and_the_loss_goes_down():
    losses = train(tiny_model(), steps=40, progress=False)
    assert len(losses) == 40
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0]


def test_training_gives_the_same_numbers_on_one_thread_or_two():
    threads = torch.get_num_threads()
    runs = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            model = tiny_model()
            runs.append((train(model, steps=20, progress=False), model.state_dict()))
            assert torch.get_num_threads() == n, "train did not restore the thread count"
    finally:
        torch.set_num_threads(threads)
    (losses_1, state_1), (losses_2, state_2) = runs
    assert losses_1 == losses_2
    assert all(torch.equal(state_1[k], state_2[k]) for k in state_1)


def test_the_books_adam_trains_the_weights_torchs_adam_trains_to_the_bit():
    """FullBatchAdam is torch.optim.Adam's arithmetic: the chapter's model, the chapter's task
    and 60 steps give the same losses and weights with either optimiser."""
    from mha.tasks import LookbackTask

    task = LookbackTask()
    runs = []
    for make in (train_module.FullBatchAdam, torch.optim.Adam):
        torch.manual_seed(3)
        model = LookbackModel(task, d_model=32, num_heads=2)
        optimiser, tokens, losses = make(model.parameters(), lr=0.01), task.train_set(), []
        model.train()
        with train_module.one_thread():
            for _ in range(60):
                loss = task.loss(model(tokens), tokens)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                losses.append(loss.item())
        runs.append((losses, model.state_dict()))
    (ours, our_state), (torchs, torch_state) = runs
    assert ours == torchs
    assert all(torch.equal(our_state[k], torch_state[k]) for k in our_state)


def test_the_equality_test_would_see_an_adam_that_differs_in_one_constant():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    b.load_state_dict(a.state_dict())
    x = torch.randn(8, 4)
    for model, eps in ((a, 1e-8), (b, 1e-7)):
        optimiser = train_module.FullBatchAdam(model.parameters(), eps=eps)
        for _ in range(3):
            optimiser.zero_grad()
            model(x).square().sum().backward()
            optimiser.step()
    assert not torch.equal(a.weight, b.weight)


def test_training_in_a_fresh_process_does_not_import_torch_dynamo():
    """What FullBatchAdam is for: torch.optim's first step imports torch._dynamo (seconds)."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from mha.tasks import LookbackModel, LookbackTask\n"
        "from mha.train import train\n"
        "torch.manual_seed(0)\n"
        "train(LookbackModel(LookbackTask(), 8, 2), steps=2, progress=False)\n"
        "print('torch._dynamo' in sys.modules)\n"
        "torch.optim.Adam([torch.zeros(1, requires_grad=True)]).step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]  # and torch's own Adam would import it


def test_resuming_gives_the_model_of_one_longer_run():
    """200 steps then 600 more (the chapter's longer budget) is 800 steps."""
    whole, parts = tiny_model(), tiny_model()
    losses = train(whole, steps=30, progress=False)
    first = train(parts, steps=10, progress=False)
    rest = train(parts, steps=20, resume=True, progress=False)
    assert first + rest == losses
    state = parts.state_dict()
    assert all(torch.equal(v, state[k]) for k, v in whole.state_dict().items())
    restarted = tiny_model()
    train(restarted, steps=10, progress=False)
    train(restarted, steps=20, progress=False)
    assert not torch.equal(restarted.readout.weight, whole.readout.weight)


def loss_now(model):
    """The training loss of the model's weights as they are, on one thread as ``train`` computes
    it (so that it can equal a loss ``train`` recorded to the bit)."""
    tokens = model.task.train_set()
    with torch.no_grad(), train_module.one_thread():
        return model.task.loss(model(tokens), tokens).item()


def spiky_run(keep_best):
    """40 steps at a learning rate far too high for the tiny task (0.3): the loss jumps about,
    and the last step leaves it well above its lowest (about 1.1 against 0.74)."""
    model = tiny_model()
    losses = train(model, steps=40, lr=0.3, keep_best=keep_best, progress=False)
    return model, losses


def test_keep_best_ends_the_run_on_its_lowest_loss_with_that_steps_adam_state():
    model, losses = spiky_run(keep_best=True)
    lowest = min(range(len(losses)), key=losses.__getitem__)
    assert loss_now(model) == losses[lowest]
    assert model.optimiser.steps == lowest  # the weights before step lowest + 1
    assert not model.training


def test_without_keep_best_the_spiky_run_ends_above_its_lowest_loss():
    """What keep_best is for, and proof that the test above can fail: the last weights."""
    model, losses = spiky_run(keep_best=False)
    assert loss_now(model) > 1.2 * min(losses)
    assert model.optimiser.steps == len(losses)


def test_keep_best_changes_nothing_when_the_last_weights_are_the_best():
    """Outside a spike (the chapter's runs on the machine that wrote it) the weights and Adam
    state are the ones the run ends with, to the bit."""
    kept, last = tiny_model(), tiny_model()
    losses = train(kept, steps=30, keep_best=True, progress=False)
    assert train(last, steps=30, progress=False) == losses
    assert loss_now(last) < min(losses)
    state = last.state_dict()
    assert all(torch.equal(v, state[k]) for k, v in kept.state_dict().items())
    assert kept.optimiser.steps == last.optimiser.steps == 30
    assert all(map(torch.equal, kept.optimiser.exp_avg, last.optimiser.exp_avg))


def test_training_side_by_side_keeps_the_best_as_train_does():
    alone, losses = spiky_run(keep_best=True)
    together = {0: tiny_model()}
    assert train_all(together, steps=40, lr=0.3, keep_best=True, progress=False) == {0: losses}
    state = alone.state_dict()
    assert all(torch.equal(v, state[k]) for k, v in together[0].state_dict().items())
    assert together[0].optimiser.steps == alone.optimiser.steps < 40
    assert together[0].optimiser.lr == alone.optimiser.lr == 0.3


def test_training_side_by_side_gives_the_models_one_after_another_gives_to_the_bit():
    """``train_all`` (copies of this process on Linux) against ``train``, model by model, then
    resumed: the same weights, Adam state and losses, to the bit."""
    alone = {h: tiny_model(h) for h in (1, 2)}
    together = {h: tiny_model(h) for h in (1, 2)}
    for resume, steps in ((False, 12), (True, 8)):
        expected = {h: train(m, steps, resume=resume, progress=False) for h, m in alone.items()}
        found = train_all(together, steps, resume=resume, progress=False)
        assert found == expected
    for h, model in together.items():
        state = alone[h].state_dict()
        assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
        theirs = alone[h].optimiser
        assert model.optimiser.steps == theirs.steps == 20
        assert all(map(torch.equal, model.optimiser.exp_avg_sq, theirs.exp_avg_sq))
        assert not model.training


def test_the_equality_test_above_would_see_one_step_more():
    one, other = tiny_model(), tiny_model()
    train(one, 12, progress=False)
    train_all({0: other}, 13, progress=False)
    assert not torch.equal(one.readout.weight, other.readout.weight)


def test_training_side_by_side_checks_its_arguments_before_it_starts():
    for kwargs, words in (({"steps": 0}, "positive integer"), ({"resume": True}, "not been")):
        try:
            train_all({1: tiny_model()}, progress=False, **kwargs)
        except ValueError as error:
            assert words in str(error)
        else:
            raise AssertionError(f"{kwargs} was accepted")


def test_resuming_a_model_never_trained_says_what_to_do():
    try:
        train(tiny_model(), steps=5, resume=True, progress=False)
    except ValueError as error:
        assert "has not been trained yet" in str(error)
    else:
        raise AssertionError("resume=True on an untrained model was accepted")


def test_read_pairs_finds_the_two_offsets_a_head_splits_its_weight_over():
    num_tokens = 6
    weights = torch.zeros(1, 1, num_tokens, num_tokens)  # (b, h, T, T)
    for q in range(num_tokens):
        weights[:, 0, q, max(q - 1, 0)] += 0.5  # half one back
        weights[:, 0, q, max(q - 3, 0)] += 0.5  # half three back

    class Fixed(nn.Module):
        task = LookbackTask(offsets=(3,), num_tokens=num_tokens)

        def attention_weights(self, tokens):
            return weights

    assert read_pairs(Fixed(), torch.zeros(1, num_tokens)) == [((1, 3), 1.0)]


def test_the_model_comes_back_in_eval_mode():
    model = tiny_model()
    train(model, steps=1, progress=False)
    assert not model.training


def test_steps_must_be_a_positive_integer():
    for steps in (0, -1, 2.5, True):
        try:
            train(tiny_model(), steps=steps, progress=False)
        except ValueError as error:
            assert "positive integer" in str(error)
        else:
            raise AssertionError(f"steps={steps!r} was accepted")


def test_the_quiet_mode_prints_nothing_and_the_bar_goes_to_stderr_outside_a_notebook(capsys):
    train(tiny_model(), steps=3, progress=False)
    quiet = capsys.readouterr()
    assert quiet.out == "" and quiet.err == ""
    train(tiny_model(), steps=3, label="tiny")
    loud = capsys.readouterr()
    assert loud.out == "" and "tiny" in loud.err and "3/3" in loud.err


def test_in_a_notebook_the_bar_draws_in_one_output_that_ends_as_it_began(monkeypatch):
    shown = []

    class Handle:
        def update(self, data, raw):
            shown.append(data["text/plain"])

    def display(data, raw, display_id):
        shown.append(data["text/plain"])
        return Handle()

    monkeypatch.setattr("IPython.display.display", display)
    monkeypatch.setattr(train_module, "in_notebook", lambda: True)
    with progress_bar(4, "four steps", progress=True) as bar:
        for _ in range(4):
            bar.update(1)
    assert shown[0] == shown[-1] == "four steps"
    assert any("4/4" in text for text in shown[1:-1]), shown


def test_printed_accuracies_and_readings_are_bands_that_name_what_they_mean():
    assert [accuracy_band(a) for a in (1.0, 0.99, 0.97, 0.8, 0.55)] == [
        "99 % or more",
        "99 % or more",
        "95 to 99 %",
        "70 to 95 %",
        "under 70 %",
    ]
    assert describe_head(2, 0.95) == "looks 2 back (weight > 0.9)"
    assert describe_head(3, 0.75) == "mostly 3 back (weight 0.6-0.9)"
    assert describe_head(3, 0.32) == "spread (< 0.6 on every offset)"
    assert describe_pair((1, 4), 0.94) == "1 and 4 back (weight > 0.8)"
    assert describe_pair((1, 4), 0.63) == "spread (< 0.8 on any two offsets)"
    # With "  head 1: " in front, every reading fits a phone's 44 columns.
    texts = [describe_head(4, w) for w in (0.95, 0.75, 0.3)]
    texts += [describe_pair((1, 4), w) for w in (0.9, 0.5)]
    assert max(len(t) for t in texts) <= 44 - len("  head 1: ")


def test_position_over_token_measures_where_each_query_block_reads_from():
    model = tiny_model(num_heads=2)
    before = position_over_token(model)
    with torch.no_grad():
        model.position_embedding.weight *= 3
    after = position_over_token(model)
    assert len(after) == 2
    assert all(abs(a / b - 3) < 1e-5 for a, b in zip(after, before, strict=True))


def test_the_chapters_figures_fit_a_phone_and_their_text_is_at_least_11_pt(monkeypatch):
    """The criterion of ``tests/test_figures.py``, applied to ``mha.plots_training``."""
    from test_figures import MAX_WIDTH_IN, MIN_TEXT_PT, save_as_jupyter_does

    models = {h: tiny_model(num_heads=h) for h in (1, 2)}
    tokens = TINY.eval_set()
    maps = {f"{h} heads": m.attention_weights(tokens).mean(dim=0) for h, m in models.items()}
    weight = models[2].attention.W_query.weight.T  # (d_in, d_out)
    figures = {
        "plot_attention_maps": plot_attention_maps(maps),
        "plot_query_weight_trained": plot_query_weight_trained(weight, 3 * weight, 2),
    }
    assert {name for name in dir(plots_training) if name.startswith("plot_")} == set(figures)
    for name, fig in figures.items():
        saved = save_as_jupyter_does(fig, monkeypatch)
        assert saved.width_px <= MAX_WIDTH_IN * 100, name
        assert saved.texts and min(t.points for t in saved.texts) >= MIN_TEXT_PT, name
