"""The stress harness: sweep seeds, shapes and modes, check results, print a repro command for
every failure (:mod:`.harness`, :mod:`.report`, :mod:`.cli`), and the catalogue of real bugs it
must catch with the correct programs it must pass (:mod:`.catalogue`, :mod:`.killmatrix`);
schedule mode's shrinking of a failing schedule (:mod:`.shrink`) and bounded exhaustive search
(:mod:`.explore`)."""
