"""The learner's parts, each a module with a small interface (layer 1 of the README's Layout).

network      QNetwork: a torso, an optional LSTM core and a value head, one flax module
torsos       MLP, MinAtar CNN, Nature CNN, LSTM core
heads        value heads (scalar, dueling; `heads.register` adds one)
losses       TD losses over transitions (mse, huber; `losses.register` adds one)
distributional  the C51, QR-DQN and HL-Gauss heads and their losses
iqn          implicit quantile networks: the head and loss "iqn"
munchausen   M-DQN's targets: the loss "m-dqn"
sequence_loss  the recurrent loss over stored sequences (R2D2)
margin       the demonstrations' large-margin term
exploration  epsilon-greedy
dense        dense layer kinds (dense; `dense.register` adds one)
noisy        noisy nets: the dense layer kind "noisy"
optim        Adam / 1-bit Adam with clipping and the skip of non-finite steps
update       one gradient step with the precision policy inside
target       the target network's update
state        AgentState, UpdateMetrics
dqn          `make_agent`: assembles the parts into an `Agent`
build        `agent_of`: the agent a `TrainConfig` trains (the loop's and the baseline's)
precision    the compute-dtype policy, loss scaling, the fp32 fallback
schedules    the traced hyperparameters' schedules
evaluate     one evaluation for the loop and the baseline
"""

from jaxrl_fast.agent import (
    distributional,  # noqa: F401  (registers its heads and losses)
    iqn,  # noqa: F401  (registers the head and loss "iqn")
    munchausen,  # noqa: F401  (registers the loss "m-dqn")
    noisy,  # noqa: F401  (registers the dense layer kind "noisy")
)
from jaxrl_fast.agent.dqn import Agent, make_agent
from jaxrl_fast.agent.heads import ValueHead
from jaxrl_fast.agent.losses import Loss, LossInput
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.agent.state import AgentState, UpdateMetrics

__all__ = [
    "Agent",
    "AgentState",
    "Loss",
    "LossInput",
    "QNetwork",
    "UpdateMetrics",
    "ValueHead",
    "make_agent",
]
