"""Cheminformatics on RDKit: parsing, functional groups, descriptors, drug-likeness filters,
Morgan fingerprints, Tanimoto similarity and Butina clustering.

Tool modules are imported lazily, one per tool, so binding one tool never imports the others.
"""
