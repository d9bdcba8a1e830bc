"""Victim selection (DESIGN §2 "Victim selection"), one rule per module:

- `candidates`: a candidate (`Victim`) and the cycle's candidates per pool and model (`VictimQueue`);
- `ordering`: the one order of candidates (`candidates_ordering`);
- `fill_back`: the one fill-back loop that makes a chosen set minimal (used by the walk, the index and
  preempt_within's demotions);
- `selection`: the search for one job (the walk, or the index for gangs of equal pods), its failure
  memo, and taking the chosen victims;
- `index`: the per-node index of candidates that answers equal-pod gangs in time that grows with the
  victims taken.
"""
