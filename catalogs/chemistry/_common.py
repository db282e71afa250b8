"""Helpers shared by the chemistry tools: SMILES parsing with clear errors, and drug-likeness rules."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rdkit import Chem, RDLogger
from rdkit.Chem import Crippen, Descriptors, Lipinski, rdMolDescriptors

# RDKit prints its own parse errors to stderr; InvalidSmilesError carries the reason instead.
RDLogger.DisableLog("rdApp.*")


class InvalidSmilesError(ValueError):
    """A SMILES string RDKit cannot parse; ``smiles`` is the offending string, ``reason`` RDKit's complaint."""

    def __init__(self, smiles: str, reason: str, index: int | None = None):
        self.smiles = smiles
        self.reason = reason
        where = f" (item {index + 1} of the list, index {index})" if index is not None else ""
        super().__init__(f"invalid SMILES {smiles!r}{where}: {reason}")


def molecule_from_smiles(smiles: Any, index: int | None = None) -> Chem.Mol:
    """Parse ``smiles`` into a sanitized RDKit molecule.

    Args:
        smiles: the SMILES string.
        index: its 0-based position when it comes from a list (for the error message).

    Raises:
        InvalidSmilesError: when the string is empty, is not SMILES syntax, or describes an
            impossible molecule (the message carries RDKit's reason, e.g. a valence error).
        TypeError: when ``smiles`` is not a string.
    """
    if not isinstance(smiles, str):
        raise TypeError(f"expected a SMILES string, got {type(smiles).__name__}: {smiles!r}")
    if not smiles.strip():
        raise InvalidSmilesError(smiles, "the string is empty", index)
    # Parse and sanitize in two steps: the first catches syntax, the second chemistry, and
    # sanitization raises with RDKit's reason where a plain MolFromSmiles would only return None.
    molecule = Chem.MolFromSmiles(smiles, sanitize=False)
    if molecule is None:
        raise InvalidSmilesError(smiles, "not valid SMILES syntax; check brackets, ring closures and atom symbols", index)
    try:
        Chem.SanitizeMol(molecule)
    except Exception as error:  # RDKit raises several MolSanitizeException subclasses, and KekulizeException
        raise InvalidSmilesError(smiles, f"RDKit rejects the molecule: {error}", index) from None
    return molecule


def molecules_from_smiles_list(smiles_list: Iterable[str]) -> list[Chem.Mol]:
    """Parse every SMILES of a list; the error names the first invalid one and its position."""
    if isinstance(smiles_list, str):
        raise TypeError("expected a list of SMILES strings, got a single string; wrap it in a list")
    return [molecule_from_smiles(smiles, index) for index, smiles in enumerate(smiles_list)]


def molecule_from_record(molecule: Any) -> Chem.Mol:
    """Accept what ``parse_molecule`` returns (a dict with ``canonical_smiles``) or a SMILES string."""
    if isinstance(molecule, dict) and "canonical_smiles" in molecule:
        return molecule_from_smiles(molecule["canonical_smiles"])
    if isinstance(molecule, str):
        return molecule_from_smiles(molecule)
    raise TypeError(f"expected the dict returned by parse_molecule or a SMILES string, got {type(molecule).__name__}")


def descriptor_values(molecule: Chem.Mol) -> dict[str, float | int]:
    """Physico-chemical descriptors of one molecule (weights in Da, TPSA in Å²)."""
    return {
        "molecular_weight": round(Descriptors.MolWt(molecule), 2),
        "logp": round(Crippen.MolLogP(molecule), 2) + 0.0,  # + 0.0 turns -0.0 into 0.0
        "hbd": Lipinski.NumHDonors(molecule),
        "hba": Lipinski.NumHAcceptors(molecule),
        "tpsa": round(rdMolDescriptors.CalcTPSA(molecule), 2),
        "rotatable_bonds": rdMolDescriptors.CalcNumRotatableBonds(molecule),
        "ring_count": rdMolDescriptors.CalcNumRings(molecule),
        "aromatic_ring_count": rdMolDescriptors.CalcNumAromaticRings(molecule),
    }


def lipinski_violations(descriptors: dict[str, float | int]) -> list[str]:
    """Broken criteria of Lipinski's rule of five (Lipinski et al., Adv. Drug Deliv. Rev. 23:3, 1997):
    MW ≤ 500 Da, LogP ≤ 5, H-bond donors ≤ 5, H-bond acceptors ≤ 10."""
    violations = []
    if descriptors["molecular_weight"] > 500:
        violations.append("molecular_weight > 500")
    if descriptors["logp"] > 5:
        violations.append("logp > 5")
    if descriptors["hbd"] > 5:
        violations.append("hbd > 5")
    if descriptors["hba"] > 10:
        violations.append("hba > 10")
    return violations


def passes_lipinski(violations: list[str]) -> bool:
    """Lipinski's paper flags poor absorption when *more than one* criterion is broken."""
    return len(violations) <= 1


def veber_violations(descriptors: dict[str, float | int]) -> list[str]:
    """Broken criteria of Veber's rule (Veber et al., J. Med. Chem. 45:2615, 2002):
    rotatable bonds ≤ 10 and TPSA ≤ 140 Å²; both must hold."""
    violations = []
    if descriptors["rotatable_bonds"] > 10:
        violations.append("rotatable_bonds > 10")
    if descriptors["tpsa"] > 140:
        violations.append("tpsa > 140")
    return violations
