"""Tool filter_drug_like: keep the molecules of a list that pass Lipinski, Veber or both."""

from __future__ import annotations

from toolpath.catalogs.chemistry._common import descriptor_values, lipinski_violations, molecules_from_smiles_list, passes_lipinski, veber_violations

RULES = ("lipinski", "veber", "both")


def filter_drug_like(smiles_list: list[str], rule: str = "lipinski") -> dict:
    """Split a list of molecules into drug-like candidates and rejects.

    Args:
        smiles_list: SMILES strings.
        rule: ``"lipinski"`` (rule of five, at most one violation), ``"veber"`` (rotatable bonds
            ≤ 10 and TPSA ≤ 140 Å²) or ``"both"``.

    Returns:
        ``{"rule", "passed": [smiles, ...], "failed": [{"smiles", "violations"}, ...]}`` keeping the
        input order.

    Raises:
        ValueError: for an unknown rule, or an invalid SMILES (named, with its position).
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; use one of {', '.join(RULES)}")
    molecules = molecules_from_smiles_list(smiles_list)
    passed, failed = [], []
    for smiles, molecule in zip(smiles_list, molecules):
        values = descriptor_values(molecule)
        violations: list[str] = []
        ok = True
        if rule in ("lipinski", "both"):
            lipinski = lipinski_violations(values)
            violations += lipinski
            ok = ok and passes_lipinski(lipinski)
        if rule in ("veber", "both"):
            veber = veber_violations(values)
            violations += veber
            ok = ok and not veber
        if ok:
            passed.append(smiles)
        else:
            failed.append({"smiles": smiles, "violations": violations})
    return {"rule": rule, "passed": passed, "failed": failed}
