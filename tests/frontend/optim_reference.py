#!/usr/bin/env python3
"""Writes torch 1.13's torch.optim runs for tests/frontend/optim_parity_test.cc as .npy files (run
by ctest as the frontend.optim_reference fixture, into the build tree; nothing is committed as
numbers). Like PyTorch's own C++ frontend tests its optimizers (test/cpp/api/optim.cpp): a small
fixed network, 1,000 steps, the parameters sampled every 100.

The network: Linear(3, 6) - tanh - Linear(6, 2) - sigmoid, float32, torch's initial weights for
seed 0; fixed inputs x [8, 3]; the loss is the sum of the outputs (as torch's test: it has no
minimum to reach, so the gradients stay well above float32 rounding for all 1,000 steps, where a
converging loss would leave them at rounding level and amplify it, in Adam and RMSprop above all).

  init_<param>.npy, x.npy, steps.npy (the sampled steps: 1, 100, 200, ..., 1000)
  <case>/samples_<param>.npy        the parameter after each sampled step, [11, *shape]
  <case>/param_groups.<g>.<key>.npy torch's optimizer.state_dict() after the run: every group's
                                    hyperparameters (float64; betas as beta1, beta2; flags 0/1)
                                    and params (int64 indices)
  <case>/state.<i>.<key>.npy        its per-parameter state (buffers float32, step int64)

With --calibrate (not run by ctest, ~35 s) it writes nothing and prints, per case, how far the
run parts from 3 copies of itself whose initial weights are perturbed by about one float32 ulp:
the scale of difference two correct float32 implementations can show, which the test's
tolerance is set from (see optim_parity_test.cc). A case that parts far more is chaotic and is
no test of an optimizer: the cases below are ones that do not (a centered RMSprop with alpha 0.9
at lr 1e-3 parted by 1e-2 and was replaced).
"""
import argparse
import os

import numpy as np
import torch

STEPS, SAMPLE_EVERY = 1000, 100
O = torch.optim
LR = O.lr_scheduler


def weights_and_biases(net):
    """Two groups: the weights (0.weight, 2.weight), then the biases: params() is then
    [0.weight, 2.weight, 0.bias, 2.bias], not the module's order."""
    p = dict(net.named_parameters())
    return [p["0.weight"], p["2.weight"]], [p["0.bias"], p["2.bias"]]


# name -> (make optimizer from the network, make scheduler from the optimizer or None).
# tests/frontend/optim_parity_test.cc builds the same from the name (and checks the hyperparameters
# against param_groups.*).
CASES = {
    "sgd": (lambda n: O.SGD(n.parameters(), lr=0.1), None),
    "sgd_weight_decay": (lambda n: O.SGD(n.parameters(), lr=0.1, weight_decay=1e-2), None),
    "sgd_momentum_dampening": (lambda n: O.SGD(n.parameters(), lr=0.05, momentum=0.9, dampening=0.1), None),
    "sgd_nesterov_weight_decay": (
        lambda n: O.SGD(n.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3), None),
    "adam": (lambda n: O.Adam(n.parameters(), lr=1e-2), None),
    "adam_weight_decay": (lambda n: O.Adam(n.parameters(), lr=1e-2, weight_decay=1e-2), None),
    "adam_amsgrad": (lambda n: O.Adam(n.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=1e-3, amsgrad=True),
                     None),
    "adamw": (lambda n: O.AdamW(n.parameters(), lr=1e-2, weight_decay=0.1), None),
    "adamw_amsgrad": (lambda n: O.AdamW(n.parameters(), lr=1e-2, amsgrad=True), None),
    "rmsprop": (lambda n: O.RMSprop(n.parameters(), lr=1e-3), None),
    "rmsprop_momentum_weight_decay": (lambda n: O.RMSprop(n.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-3),
                                      None),
    "rmsprop_centered": (lambda n: O.RMSprop(n.parameters(), lr=1e-3, centered=True, weight_decay=1e-2), None),
    "rmsprop_centered_momentum": (lambda n: O.RMSprop(n.parameters(), lr=1e-3, centered=True, momentum=0.5), None),
    "adagrad": (lambda n: O.Adagrad(n.parameters(), lr=0.1), None),
    "adagrad_lr_decay": (lambda n: O.Adagrad(n.parameters(), lr=0.1, lr_decay=1e-2, weight_decay=1e-3,
                                             initial_accumulator_value=0.1), None),
    # Two groups each, with different hyperparameters, under a scheduler (stepped every step).
    "groups_sgd_steplr": (
        lambda n: O.SGD([{"params": weights_and_biases(n)[0], "lr": 0.1, "weight_decay": 1e-3},
                         {"params": weights_and_biases(n)[1]}], lr=0.05, momentum=0.9),
        lambda o: LR.StepLR(o, step_size=300, gamma=0.5)),
    "groups_adamw_cosine": (
        lambda n: O.AdamW([{"params": weights_and_biases(n)[0], "weight_decay": 0.1},
                           {"params": weights_and_biases(n)[1], "lr": 3e-3, "amsgrad": True}],
                          lr=1e-2, weight_decay=1e-2),
        lambda o: LR.CosineAnnealingLR(o, T_max=400, eta_min=1e-4)),
    "groups_rmsprop_linear": (
        lambda n: O.RMSprop([{"params": list(n[0].parameters()), "centered": True},
                             {"params": list(n[2].parameters()), "lr": 3e-3, "momentum": 0.5}], lr=1e-3),
        lambda o: LR.LinearLR(o, start_factor=0.1, total_iters=200)),
    "groups_adagrad_steplr": (
        lambda n: O.Adagrad([{"params": list(n[2].parameters()), "lr": 0.05, "lr_decay": 1e-2},
                             {"params": list(n[0].parameters()), "weight_decay": 1e-2}], lr=0.05),
        lambda o: LR.StepLR(o, step_size=250, gamma=0.7)),
}

# torch options gearbox does not offer: every case leaves them at these values.
NOT_OFFERED = {"maximize": False, "foreach": None, "differentiable": False, "capturable": False, "fused": False}


def network():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2), torch.nn.Sigmoid())


def inputs():
    i = torch.arange(8 * 3, dtype=torch.float64)
    return torch.sin(0.7 * i + 0.3).reshape(8, 3).float()


def save(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(arr))


def write_state(d, opt):
    state = opt.state_dict()
    for g, group in enumerate(state["param_groups"]):
        for key, value in group.items():
            if key in NOT_OFFERED:
                assert value == NOT_OFFERED[key], (key, value)
            elif key == "initial_lr":
                pass  # the scheduler's record of the base rate (gearbox's scheduler keeps it)
            elif key == "params":
                save(f"{d}/param_groups.{g}.params.npy", np.array(value, dtype=np.int64))
            elif key == "betas":
                save(f"{d}/param_groups.{g}.beta1.npy", np.array(value[0], dtype=np.float64))
                save(f"{d}/param_groups.{g}.beta2.npy", np.array(value[1], dtype=np.float64))
            else:
                save(f"{d}/param_groups.{g}.{key}.npy", np.array(float(value), dtype=np.float64))
    for i, entries in state["state"].items():
        for key, value in entries.items():
            if value is None:
                continue  # SGD without momentum: torch records a momentum_buffer of None
            if key == "step":
                save(f"{d}/state.{i}.step.npy", np.array(int(value), dtype=np.int64))
            else:
                save(f"{d}/state.{i}.{key}.npy", value.numpy())


def run(make_opt, make_sched, x, perturb=None):
    """The case's run: its samples {name: [sample, ...]} and the optimizer. perturb: a seed to
    multiply the initial weights by 1 + U(-2e-7, 2e-7) (about one float32 ulp) with."""
    net = network()
    if perturb is not None:
        g = torch.Generator().manual_seed(perturb)
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(1 + (torch.rand(p.shape, generator=g) * 2 - 1) * 2e-7)
    opt = make_opt(net)
    sched = make_sched(opt) if make_sched else None
    samples = {k: [] for k, _ in net.named_parameters()}
    for step in range(1, STEPS + 1):
        loss = net(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched:
            sched.step()
        if step == 1 or step % SAMPLE_EVERY == 0:
            for k, p in net.named_parameters():
                samples[k].append(p.detach().numpy().copy())
    return samples, opt


def scaled_difference(got, want, floor):
    """optim_parity_test.cc's measure: max |got - want| / (|want| + floor)."""
    return float(np.max(np.abs(got - want) / (np.abs(want) + floor)))


def buffer_difference(got, want):
    """Its measure for state buffers: max |got - want| / max |want|."""
    return float(np.max(np.abs(got - want)) / max(np.abs(want).max(), 1e-30))


def calibrate(x):
    """How far two correct float32 runs of each case part: the run against 3 copies of itself
    from perturbed initial weights, in the test's measures."""
    for name, (make_opt, make_sched) in CASES.items():
        want, opt = run(make_opt, make_sched, x)
        want_state = opt.state_dict()["state"]
        worst_p = worst_s = 0.0
        for seed in range(3):
            got, got_opt = run(make_opt, make_sched, x, perturb=seed)
            for k in want:
                worst_p = max(worst_p, scaled_difference(np.stack(got[k]), np.stack(want[k]), 0.1))
            for i, entries in got_opt.state_dict()["state"].items():
                for key, value in entries.items():
                    if isinstance(value, torch.Tensor) and value.dim() > 0:
                        w = want_state[i][key].numpy()
                        worst_s = max(worst_s, buffer_difference(value.numpy(), w))
        print(f"{name:32s} parameters {worst_p:.2e}  state {worst_s:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--calibrate", action="store_true",
                    help="print how far each case's run parts from copies with perturbed initial weights")
    args = ap.parse_args()
    torch.set_num_threads(1)
    x = inputs()
    if args.calibrate:
        calibrate(x)
        return
    out = args.out_dir
    save(f"{out}/x.npy", x.numpy())
    sampled = [1] + list(range(SAMPLE_EVERY, STEPS + 1, SAMPLE_EVERY))
    save(f"{out}/steps.npy", np.array(sampled, dtype=np.int64))
    for k, v in network().state_dict().items():
        save(f"{out}/init_{k}.npy", v.numpy())
    for name, (make_opt, make_sched) in CASES.items():
        samples, opt = run(make_opt, make_sched, x)
        d = os.path.join(out, name)
        for k, v in samples.items():
            save(f"{d}/samples_{k}.npy", np.stack(v))
        write_state(d, opt)


if __name__ == "__main__":
    main()
