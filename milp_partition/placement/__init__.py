"""The device-placement (scheduling) problem: data model, bounds, conversions, decompositions and solve steps."""
