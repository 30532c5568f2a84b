"""The portfolio optimizer: problem, MILP model, solve, fast path, rolling horizon.

PuLP is imported only inside this package (and lazily by its callers).
"""

from broker.planning.optimizer.problem import PlanningProblem, PlanOptions, build_problem

__all__ = ["PlanOptions", "PlanningProblem", "build_problem"]
